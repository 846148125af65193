"""Verification of a parsed or transformed module, op by op, so that the failing op is known.

The parser, `irflow-opt` and the compiler all verify through `first_verify_failure`:
the checks of `module.verify()` (nested ops first) without xDSL's habit of
printing the whole module into every exception, plus the rule that an op's
properties and attributes share one namespace.

Most ops of a module repeat a few signatures (the same op, operand and
result types, properties and attributes).  An op whose verifier reads
nothing else (its `verify_` marked `@signature_verifier`, no regions or
successors, no trait with a verifier) is checked once per distinct
signature in a walk; the others every time.  Only successes are
remembered, so a failing op is reported exactly as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation
from xdsl.traits import IsTerminator, NoTerminator, OpTrait
from xdsl.utils.exceptions import VerifyException

Verifier = TypeVar("Verifier", bound=Callable[..., None])


def first_verify_failure(module: Operation) -> tuple[Operation, Exception] | None:
    """The first op (nested ops first, as `module.verify()` goes) that fails verification, and why.

    A verifier that crashes on IR it did not expect (an assertion, a KeyError)
    counts as a failure too: bad input must never surface as a traceback.
    """
    verified: set[tuple[object, ...]] = set()  # ids stay valid: the module holds every keyed object
    for op in module.walk(region_first=True):
        try:
            verify_op(op, verified)
        except VerifyException as e:
            return op, e
        except Exception as e:  # noqa: BLE001 - see the docstring
            return op, VerifyException(f"failed to verify ({type(e).__name__}: {e})")
    return None


def verify_op(op: Operation, verified: set[tuple[object, ...]] | None = None) -> None:
    """`Operation.verify(verify_nested_ops=False)` plus the empty-block check of `Block.verify`.

    Written out because xDSL's version prints the whole module into the
    exception's notes on every failure, which is slow on big modules and
    useless here: the error already points at the op.  `verified` holds the
    signatures already verified in this walk (see the module's docstring).
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
    if verified is None or not _signature_only(type(op)):
        op.verify_()
        return
    key = (
        type(op),
        *[id(v.type) for v in op.operands],
        None,
        *[id(r.type) for r in op.results],
        None,
        *[(k, id(a)) for k, a in op.properties.items()],
        None,
        *[(k, id(a)) for k, a in op.attributes.items()],
    )
    if key not in verified:
        op.verify_()
        verified.add(key)


def signature_verifier(verify: Verifier) -> Verifier:
    """Mark an op's `verify_` as reading only the op's signature: its operand and result types,
    properties and attributes (not its operands' owners, uses, parent or neighbours).

    A subclass that overrides the method is not marked unless it says so too.
    """
    verify.__dict__["reads_signature_only"] = True
    return verify


def _chain(verify: object) -> tuple[list[object], object]:
    """The IRDL definitions a class's `verify_` checks, and the op's own method it calls last.

    `irdl_op_definition` replaces `verify_` by a function that checks the
    definition and then calls the method the class had (maybe another
    class's such function): read them from its closure.
    """
    definitions: list[object] = []
    while getattr(verify, "__qualname__", "").startswith("get_accessors_from_op_def."):
        cells = dict(zip(verify.__code__.co_freevars, verify.__closure__ or ()))  # type: ignore[attr-defined]
        definitions.append(cells["op_def"].cell_contents)
        verify = cells["custom_verify"].cell_contents if "custom_verify" in cells else Operation.verify_
    return definitions, verify


@functools.cache
def _signature_only(cls: type[Operation]) -> bool:
    """Whether everything `cls().verify_()` checks is a function of the op's signature."""
    if not issubclass(cls, IRDLOperation):
        return False
    definitions, own = _chain(cls.verify_)
    for op_def in definitions:
        if op_def.regions or op_def.successors or any(type(t).verify is not OpTrait.verify for t in op_def.traits):  # type: ignore[attr-defined]
            return False
    return own is Operation.verify_ or bool(getattr(own, "reads_signature_only", False))


@functools.cache
def _declared_properties(cls: type[Operation]) -> frozenset[str]:
    return frozenset(cls.get_irdl_definition().properties) if issubclass(cls, IRDLOperation) else frozenset()


def property_names(op: Operation) -> frozenset[str] | set[str]:
    """Every property name `op` has or could have: an attribute of such a name could not be told apart in text."""
    declared = _declared_properties(type(op))
    return declared if op.properties.keys() <= declared else declared | op.properties.keys()
