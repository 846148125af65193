"""Verification of a parsed or transformed module, op by op, so that the failing op is known.

The parser, `irflow-opt` and the compiler all verify through `first_verify_failure`:
the checks of `module.verify()` (nested ops first) without xDSL's habit of
printing the whole module into every exception, plus the rule that an op's
properties and attributes share one namespace.
"""

from __future__ import annotations

import functools

from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation
from xdsl.traits import IsTerminator, NoTerminator
from xdsl.utils.exceptions import VerifyException


def first_verify_failure(module: Operation) -> tuple[Operation, Exception] | None:
    """The first op (nested ops first, as `module.verify()` goes) that fails verification, and why.

    A verifier that crashes on IR it did not expect (an assertion, a KeyError)
    counts as a failure too: bad input must never surface as a traceback.
    """
    for op in module.walk(region_first=True):
        try:
            verify_op(op)
        except VerifyException as e:
            return op, e
        except Exception as e:  # noqa: BLE001 - see the docstring
            return op, VerifyException(f"failed to verify ({type(e).__name__}: {e})")
    return None


def verify_op(op: Operation) -> None:
    """`Operation.verify(verify_nested_ops=False)` plus the empty-block check of `Block.verify`.

    Written out because xDSL's version prints the whole module into the
    exception's notes on every failure, which is slow on big modules and
    useless here: the error already points at the op.
    """
    block = op.parent
    region = block.parent if block is not None else None
    if op.successors:
        if block is None or region is None:
            raise VerifyException(f"Operation {op.name} with block successors does not belong to a block or a region")
        if block.last_op is not op:
            raise VerifyException(f"Operation {op.name} with block successors must terminate its parent block")
        if any(succ.parent is not region for succ in op.successors):
            raise VerifyException(f"Operation {op.name} is branching to a block of a different region")
    if block is not None and region is not None and block.last_op is op:
        parent = region.parent
        if len(region.blocks) == 1:
            if parent is not None and not parent.has_trait(NoTerminator) and not op.has_trait(IsTerminator):
                raise VerifyException(
                    f"Operation {op.name} terminates block in single-block region but is not a terminator"
                )
        elif not op.has_trait(IsTerminator):
            raise VerifyException(f"Operation {op.name} terminates block in multi-block region but is not a terminator")
    if op.attributes and (clash := sorted(op.attributes.keys() & property_names(op))):
        raise VerifyException(
            f"attribute {', '.join(repr(k) for k in clash)} has the name of a property of {op.name}: "
            "an op's properties and attributes share one namespace, as in MLIR"
        )
    for r in op.regions:
        if len(r.blocks) == 1 and r.blocks[0].first_op is None and not op.has_trait(NoTerminator):
            raise VerifyException(
                f"Operation {op.name} contains empty block in single-block region that expects at least a terminator"
            )
    op.verify_()


@functools.cache
def _declared_properties(cls: type[Operation]) -> frozenset[str]:
    return frozenset(cls.get_irdl_definition().properties) if issubclass(cls, IRDLOperation) else frozenset()


def property_names(op: Operation) -> frozenset[str] | set[str]:
    """Every property name `op` has or could have: an attribute of such a name could not be told apart in text."""
    declared = _declared_properties(type(op))
    return declared if op.properties.keys() <= declared else declared | op.properties.keys()
