"""irflow-opt: mlir-opt for irflow, on xDSL's `xDSLOptMain`.

    irflow-opt [file|-] -p 'pass-a,pass-b{opt=1}' [-o out]

Reads text IR with irflow's lark parser (irflow.textir), knows the job and
buffer dialects, irflow's passes (`irflow.passes.get_all_passes`) and xDSL's
own (canonicalize, cse, dce, ...).  Every problem in the input or raised by a
pass is one `file:line:col: error: message` on stderr and exit status 1; with
`--verify-diagnostics` the message goes to stdout and the run goes on (exit 0),
so lit tests can FileCheck it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from io import StringIO
from typing import IO

from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
from xdsl.passes import ModulePass, PassPipeline, get_pass_option_infos
from xdsl.utils.exceptions import DiagnosticException
from xdsl.xdsl_opt_main import xDSLOptMain

from irflow.errors import CompileError, IrflowError, SourceLocation
from irflow.textir import parse_module, print_module
from irflow.textir.parser import first_verify_failure


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


class ToolError(Exception):
    """A problem with the command line itself (unknown pass, bad option): reported without a location."""


class IrflowOptMain(xDSLOptMain):
    version_format = f"irflow-opt {_version('irflow')} (xDSL {{xdsl_version}})"

    # -- registries

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        from irflow.dialects.buffer import Buffer
        from irflow.dialects.job import Job

        for dialect in (Job, Buffer):
            if dialect.name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(dialect.name, lambda d=dialect: d)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        from irflow.passes import get_all_passes

        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["mlir"] = lambda io: self._parse(io.read().decode(), 0)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        add = arg_parser.add_argument
        add("--print-ir-after-all", action="store_true", help="print the IR to stderr after every pass")
        add(
            "--print-ir-after-change",
            action="store_true",
            help="print the IR to stderr after every pass that changed it",
        )
        add(
            "--verify-roundtrip",
            action="store_true",
            help="after parsing and after every pass, print the IR, parse it back and fail if anything differs",
        )
        add("--list-passes", action="store_true", help="list the registered passes with their options and exit")
        add(
            "--emit",
            choices=("ir", "memory-plan", "sbp-report"),
            default="ir",
            help="what to print after the passes: the IR, each planned buffer.program's memory plan "
            "(a table of buffers, offsets and lifetimes with the ratio to the lower bound), or per job "
            "the SBP report of sbp-infer,insert-boxing (each boxing, its collective, bytes per step, "
            "the origin of each decision)",
        )

    # -- pipeline

    def setup_pipeline(self) -> None:
        passes = {name: _loader(name, factory) for name, factory in self.available_passes.items()}
        last_text = [""]

        def after_each(previous: ModulePass | None, module: ModuleOp, _next: ModulePass | None) -> None:
            if previous is None:
                if self.args.print_ir_after_change:
                    last_text[0] = print_module(module)
                return
            if not self.args.disable_verify:
                self.verify(module, f"after {previous.name}")
            if self.args.verify_roundtrip:
                self.check_roundtrip(module, f"after {previous.name}")
            if self.args.print_ir_after_all or self.args.print_ir_after_change:
                text = print_module(module, generic=self.args.print_op_generic, debuginfo=self.args.print_debuginfo)
                if self.args.print_ir_after_all or text != last_text[0]:
                    sys.stderr.write(f"// -----// IR Dump After {previous.name} //----- //\n{text}\n")
                last_text[0] = text

        try:
            self.pipeline = PassPipeline.parse_spec(passes, self.args.passes, after_each)
        except ToolError:
            raise
        except Exception as e:  # noqa: BLE001 - xDSL reports bad specs with plain Exception/ValueError
            raise ToolError(f"invalid pass pipeline '{self.args.passes}': {e}") from None

    def verify(self, module: ModuleOp, when: str) -> None:
        failure = first_verify_failure(module)
        if failure is not None:
            op, e = failure
            raise CompileError(f"'{op.name}' op {e} ({when})", location_of(op))

    def check_roundtrip(self, module: ModuleOp, when: str) -> None:
        for generic in (False, True):
            form = "generic" if generic else "custom"
            try:
                text = print_module(module, generic=generic, debuginfo=True)
            except Exception as e:  # noqa: BLE001 - xDSL's printer refuses some IR (an attribute named like a property)
                raise CompileError(f"the IR {when} cannot be printed in the {form} form: {e}") from None
            again = parse_module(text, f"<IR {when}>", ctx=self.ctx)
            text_again = print_module(again, generic=generic, debuginfo=True)
            if text_again != text or not again.is_structurally_equivalent(module):
                diff = "".join(
                    difflib.unified_diff(
                        text.splitlines(True), text_again.splitlines(True), "printed", "printed-parsed-printed", n=1
                    )
                )
                raise CompileError(f"round trip of the {form} form {when} changed the IR\n{diff}")

    # -- running

    def _parse(self, text: str, line_offset: int) -> ModuleOp:
        module = parse_module(
            "\n" * line_offset + text,
            self.get_input_name(),
            ctx=self.ctx,
            verify=not self.args.disable_verify,
            implicit_module=not self.args.no_implicit_module,
        )
        if self.args.verify_roundtrip:
            self.check_roundtrip(module, "after parsing")
        return module

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        if self.args.input_file == "-":
            self.args.input_file = None  # mlir-opt's spelling of stdin
        return super().get_input_stream()

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        if file_extension == "mlir":
            return self._parse(chunk.read().decode(), start_offset)
        return super().parse_chunk(chunk, file_extension, start_offset)

    def output_resulting_program(self, prog: ModuleOp) -> str:
        if self.args.emit == "ir":
            return super().output_resulting_program(prog)
        if self.args.emit == "sbp-report":
            from irflow.dialects.job import JobOp
            from irflow.passes.insert_boxing import sbp_report

            if any(isinstance(op, JobOp) and op.results and op.sbp is None for op in prog.walk()):
                raise CompileError("--emit=sbp-report needs every value's SBP: run sbp-infer,insert-boxing first")
            return sbp_report(prog) + "\n"
        from irflow.dialects.buffer import ProgramOp
        from irflow.runtime.memory_plan import MemoryPlan

        programs = [op for op in prog.walk() if isinstance(op, ProgramOp)]
        if not programs:
            raise CompileError("--emit=memory-plan needs buffer.program ops: run convert-job-to-buffer,plan-memory")
        try:
            return "".join(MemoryPlan.of(p).table() for p in programs)
        except ValueError as e:
            raise CompileError(str(e)) from None

    def diagnostic(self, e: Exception) -> str:
        if isinstance(e, IrflowError):
            if e.location is not None:
                return str(e)
            return f"{self.get_input_name()}: error: {e.message}"
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"{self.get_input_name()}: error: {message}"

    def run(self) -> int:  # type: ignore[override]
        if self.args.list_passes:
            sys.stdout.write(list_passes(self.available_passes))
            return 0
        try:
            chunks, file_extension = self.prepare_input()
            output = self.prepare_output()
        except (OSError, ValueError) as e:
            sys.stderr.write(f"irflow-opt: error: {e}\n")
            return 1
        try:
            for i, (chunk, offset) in enumerate(chunks):
                if i > 0:
                    output.write("// -----\n")
                try:
                    module = self.parse_chunk(chunk, file_extension, offset)
                    if module is not None:
                        self.apply_passes(module)
                        output.write(self.output_resulting_program(module))
                except (IrflowError, DiagnosticException) as e:
                    if not self.args.verify_diagnostics:
                        sys.stderr.write(self.diagnostic(e) + "\n")
                        return 1
                    output.write(self.diagnostic(e) + "\n")
                except Exception as e:  # noqa: BLE001 - a crashing pass is a bug, but still no traceback for users
                    sys.stderr.write(f"{self.get_input_name()}: error: internal error: {type(e).__name__}: {e}\n")
                    if _debug():
                        traceback.print_exc()
                    return 1
                finally:
                    chunk.close()
        finally:
            output.flush()
            if output is not sys.stdout:
                output.close()
        return 0


def location_of(op: object) -> SourceLocation | None:
    loc = getattr(op, "location", None)
    if isinstance(loc, FileLineColLoc):
        return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
    return None


def _debug() -> bool:
    import os

    return bool(os.environ.get("IRFLOW_DEBUG"))


def _loader(name: str, factory: Callable[[], type[ModulePass]]) -> Callable[[], type[ModulePass]]:
    """Make a pass that fails to import a clean command-line error, not a traceback."""

    def load() -> type[ModulePass]:
        try:
            return factory()
        except Exception as e:  # noqa: BLE001 - any import failure of someone's pass module
            raise ToolError(f"pass '{name}' is not available: {type(e).__name__}: {e}") from None

    return load


def describe_pass(cls: type[ModulePass]) -> list[str]:
    """`name: first docstring line`, then one `option: type = default` line per dataclass field."""
    doc = (cls.__doc__ or "").strip()
    # dataclasses give undocumented classes their signature as docstring
    summary = "" if not doc or doc.startswith(cls.__name__ + "(") else doc.splitlines()[0].strip()
    lines = [f"  {cls.name}" + (f": {summary}" if summary else "")]
    for info in get_pass_option_infos(cls):
        default = f" = {info.default_value}" if info.default_value is not None else ""
        # annotations may be strings (`from __future__ import annotations`); options are kebab-case on the CLI
        lines.append(f"      {info.name.replace('_', '-')}: {info.expected_type.strip(chr(39))}{default}")
    return lines


def list_passes(available: dict[str, Callable[[], type[ModulePass]]]) -> str:
    out = StringIO()
    failed: list[str] = []
    out.write("Available passes:\n")
    for name in sorted(available):
        try:
            cls = available[name]()
        except Exception as e:  # noqa: BLE001 - list what loads, note the rest
            failed.append(f"{name} ({type(e).__name__}: {e})")
            continue
        out.write("\n".join(describe_pass(cls)) + "\n")
    if failed:
        sys.stderr.write("irflow-opt: note: passes that failed to load: " + ", ".join(failed) + "\n")
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        tool = IrflowOptMain(description="irflow's modular optimizer driver", args=argv)
        return tool.run()
    except ToolError as e:
        sys.stderr.write(f"irflow-opt: error: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
