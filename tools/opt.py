"""irflow-opt: mlir-opt for irflow.

    irflow-opt [file|-] -p 'pass-a,pass-b{opt=1}' [-o out]
    irflow-opt [file|-] --pass-pipeline='builtin.module(pass-a,pass-b{opt=1})'

Reads text IR with irflow's lark parser (irflow.textir), knows the job and
buffer dialects (and xDSL's, for generic IR), runs irflow's passes and the
xDSL passes tested on its dialects (`irflow.passes.available_passes`) and
prints the result with irflow's printer.  Every problem in the input or raised
by a pass is a `file:line:col: error: message` on stderr and exit status 1;
with `--verify-diagnostics` the errors are instead checked against the
input's `// expected-error {{...}}` annotations, as mlir-opt checks them.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import get_type_hints
from io import StringIO

from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, get_pass_option_infos
from xdsl.utils.arg_spec import ArgSpec
from xdsl.utils.arg_spec import parse_pipeline as xdsl_parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError, VerifyException

import irflow.passes
from irflow.context import make_context
from irflow.errors import CompileError, IrflowError, SourceLocation, source_location
from irflow.textir import decode_source, parse_module, print_module
from irflow.textir.verification import first_verify_failure

SPLIT_MARKER = "// -----"


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


class ToolError(Exception):
    """A problem with the command line itself (unknown pass, bad option): reported without a location."""


# ----------------------------------------------------------------- diagnostics


@dataclass(frozen=True)
class Diagnostic:
    """One message of a run: severity, text and, where known, the place in the input it is about."""

    severity: str
    message: str
    location: SourceLocation | None = None
    text: str | None = None  # the full `file:line:col: error: ...` with source line and caret

    def render(self, input_name: str) -> str:
        if self.text is not None:
            return self.text
        where = str(self.location) if self.location is not None else input_name
        return f"{where}: {self.severity}: {self.message}"


def diagnostic_of(e: BaseException, input_name: str) -> Diagnostic:
    """The diagnostic an exception raised while parsing or running passes stands for."""
    if isinstance(e, IrflowError):
        if e.location is not None:
            return Diagnostic("error", e.message, e.location, str(e))
        return Diagnostic("error", e.message)
    if isinstance(e, DiagnosticException | VerifyException | ParseError):
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        return Diagnostic("error", message)
    return Diagnostic("error", f"internal error: {type(e).__name__}: {e}")


_EXPECTED = re.compile(
    r"expected-(?P<severity>error|warning|note|remark)(?P<re>-re)?"
    r"(?:@(?P<where>above|below|unknown|[+-]\d+))?\s*\{\{(?P<message>.*)\}\}"
)


@dataclass
class Expected:
    """An `// expected-error@+1 {{message}}` annotation: what must be reported, and on which line."""

    severity: str
    message: str
    regex: re.Pattern[str] | None
    line: int | None  # None: a diagnostic without a location (`@unknown`)
    annotation_line: int
    seen: bool = False

    def matches(self, d: Diagnostic, input_name: str) -> bool:
        if d.severity != self.severity:
            return False
        if self.line is None:
            if d.location is not None and d.location.file == input_name:
                return False
        elif d.location is None or d.location.file != input_name or d.location.line != self.line:
            return False
        if self.regex is not None:
            return self.regex.search(d.message) is not None
        return self.message in d.message


def _expected_regex(message: str) -> re.Pattern[str]:
    """`-re` annotations: `{{regex}}` parts are regular expressions, the rest is literal."""
    parts = re.split(r"\{\{(.*?)\}\}", message)
    return re.compile("".join(p if i % 2 else re.escape(p) for i, p in enumerate(parts)))


def expected_diagnostics(text: str, first_line: int) -> list[Expected]:
    """The annotations of one chunk whose first line is line `first_line` of the file (1-based).

    As in MLIR, `@+N`/`@-N` count from the annotation's line, `@above` is the
    closest line above that holds no annotation and `@below` the closest one
    below.
    """
    found: list[Expected] = []
    waiting_below: list[Expected] = []
    last_plain: int | None = None
    for i, line in enumerate(text.split("\n")):
        number = first_line + i
        matches = list(_EXPECTED.finditer(line)) if "expected-" in line else []
        if not matches:
            for e in waiting_below:
                e.line = number
            waiting_below.clear()
            last_plain = number
            continue
        for m in matches:
            where, message = m["where"], m["message"]
            regex = _expected_regex(message) if m["re"] else None
            e = Expected(m["severity"], message, regex, number, number)
            if where == "unknown":
                e.line = None
            elif where == "above":
                e.line = last_plain if last_plain is not None else 0
            elif where == "below":
                waiting_below.append(e)
            elif where is not None:
                e.line = number + int(where)
            found.append(e)
    for e in waiting_below:
        e.line = -1  # nothing below it: never matches, reported as missing
    return found


def check_diagnostics(expected: list[Expected], produced: list[Diagnostic], input_name: str) -> list[str]:
    """MLIR's `-verify-diagnostics`: every diagnostic expected, every expectation met."""
    problems: list[str] = []
    for d in produced:
        match = next((e for e in expected if not e.seen and e.matches(d, input_name)), None)
        if match is None:
            match = next((e for e in expected if e.matches(d, input_name)), None)
        if match is not None:
            match.seen = True
            continue
        where = str(d.location) if d.location is not None else input_name
        same_line = [
            e
            for e in expected
            if d.location is not None and e.line == d.location.line and e.severity == d.severity and not e.seen
        ]
        if same_line:
            problems.append(
                f'{where}: error: {d.severity} "{d.message}" was emitted, but the expected one differs: '
                f'"{same_line[0].message}" (line {same_line[0].annotation_line})'
            )
            same_line[0].seen = True
        else:
            problems.append(f"{where}: error: unexpected {d.severity}: {d.message}")
    for e in expected:
        if not e.seen:
            where = f"line {e.line}" if e.line is not None else "an unknown location"
            problems.append(
                f'{input_name}:{e.annotation_line}: error: expected {e.severity} "{e.message}" was not produced '
                f"(at {where})"
            )
    return problems


# ----------------------------------------------------------------- pipelines


_MODULE_PIPELINE = re.compile(r"\s*builtin\.module\s*\((?P<body>.*)\)\s*", re.S)


def pass_registry() -> dict[str, Callable[[], type[ModulePass]]]:
    """irflow's passes and the xDSL passes tested on its dialects, each loaded only when named."""
    return {name: _loader(name, factory) for name, factory in irflow.passes.available_passes().items()}


def parse_pipeline(spec: str, registry: dict[str, Callable[[], type[ModulePass]]]) -> tuple[ModulePass, ...]:
    """`a,b{opt=1}` or `builtin.module(a,b{opt=1})` as pass instances; any problem is a `ToolError`."""
    body = spec
    if m := _MODULE_PIPELINE.fullmatch(spec):
        body = m["body"]
    elif spec.lstrip().startswith("builtin.module"):
        raise ToolError(f"invalid pass pipeline '{spec}': expected 'builtin.module(...)'")
    if re.search(r"[\w-]+\s*\(", body):
        raise ToolError(
            f"invalid pass pipeline '{spec}': only module passes are supported, not nested op pipelines"
        )
    body = re.sub(r"\s*,\s*", ",", body.strip())  # `builtin.module(cse, dce)`, as MLIR writes it
    if not body:
        return ()
    try:
        specs = list(xdsl_parse_pipeline(body))
    except ArgSpecParseError as e:
        # xDSL's message holds a position line, the spec, a caret and the reason
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        position = next((line.rsplit(":", 1)[-1] for line in lines if line.startswith("pass-pipeline:")), None)
        at = f" at column {position}" if position else ""
        raise ToolError(f"invalid pass pipeline '{spec}'{at}: {lines[-1].lower()}") from None
    unknown = [s.name for s in specs if s.name not in registry]
    if unknown:
        raise ToolError(
            f"invalid pass pipeline '{spec}': unknown pass {', '.join(repr(n) for n in unknown)} "
            "(irflow-opt --list-passes lists them)"
        )
    return tuple(_instantiate(registry[s.name](), s, spec) for s in specs)


def _instantiate(cls: type[ModulePass], arg_spec: ArgSpec, spec: str) -> ModulePass:
    """The pass with its options; a bad option (type or value, as the pass's own checks say) is named."""
    known = {info.name.replace("_", "-") for info in get_pass_option_infos(cls)}
    for key in arg_spec.parameters:
        if key.replace("_", "-") not in known:
            options = f"its options are {', '.join(sorted(known))}" if known else "it takes no options"
            raise ToolError(f"invalid pass pipeline '{spec}': unknown option '{key}' of pass '{arg_spec.name}' ({options})")
    arg_spec = _integers_as_floats(cls, arg_spec)
    try:
        return cls.from_pass_spec(arg_spec)
    except (ValueError, TypeError) as e:
        for key, value in arg_spec.parameters.items():
            try:
                cls.from_pass_spec(ArgSpec(arg_spec.name, {key: value}))
            except (ValueError, TypeError) as single:
                raise ToolError(
                    f"invalid pass pipeline '{spec}': option '{key}' of pass '{arg_spec.name}': {single}"
                ) from None
        raise ToolError(f"invalid pass pipeline '{spec}': pass '{arg_spec.name}': {e}") from None


def _integers_as_floats(cls: type[ModulePass], arg_spec: ArgSpec) -> ArgSpec:
    """`arg_spec` with an integer given to a float option as that float (`effort=1`), as mlir-opt reads
    a double option; xDSL's type check refuses an int where the field says float."""
    hints = get_type_hints(cls)
    parameters = {
        key: tuple(
            float(v) if type(v) is int and v.bit_length() <= 1024 else v for v in values  # larger: refused as an int
        )
        if hints.get(key.replace("-", "_")) is float
        else values
        for key, values in arg_spec.parameters.items()
    }
    return ArgSpec(arg_spec.name, parameters)


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


# ----------------------------------------------------------------- timing


@dataclass
class Timer:
    """Wall time per phase (parse, each pass in pipeline order, verify, print), for `--time-passes`."""

    rows: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, seconds: float) -> None:
        self.rows[name] = self.rows.get(name, 0.0) + seconds

    def report(self) -> str:
        total = sum(self.rows.values())
        out = [
            "===" + "-" * 73 + "===",
            "irflow-opt execution time report".center(79),
            "===" + "-" * 73 + "===",
            f"  Total Execution Time: {total:.4f} seconds",
            "",
            f"  {'----Wall Time----':>19}  ----Name----",
        ]
        for name, seconds in [*self.rows.items(), ("Total", total)]:
            share = 100.0 * seconds / total if total else 0.0
            out.append(f"  {seconds:10.4f} ({share:5.1f}%)  {name}")
        return "\n".join(out) + "\n"


# ----------------------------------------------------------------- the driver


def split_chunks(text: str, marker: str | None) -> Iterator[tuple[str, int]]:
    """Each chunk between lines that hold only `marker`, with the number of lines before it."""
    if marker is None:
        yield text, 0
        return
    start_line = 0
    chunk: list[str] = []
    for i, line in enumerate(text.split("\n")):
        if line.strip() == marker:
            yield "\n".join(chunk), start_line
            chunk, start_line = [], i + 1
        else:
            chunk.append(line)
    yield "\n".join(chunk), start_line


class Driver:
    """Runs one input, chunk by chunk: parse, passes with checks after each, print."""

    def __init__(self, args: argparse.Namespace, passes: Sequence[ModulePass], input_name: str):
        self.args = args
        self.passes = passes
        self.input_name = input_name
        self.ctx = _context(args.allow_unregistered_dialect)
        self.timer = Timer()

    def _timed(self, name: str, run: Callable[[], object]) -> object:
        start = time.perf_counter()
        try:
            return run()
        finally:
            self.timer.add(name, time.perf_counter() - start)

    def run_chunk(self, text: str, line_offset: int) -> str:
        """The chunk's output; raises on the first problem (the caller turns it into a diagnostic)."""
        args = self.args
        module = self._timed(
            "parse" if args.disable_verify else "parse and verify",
            lambda: parse_module(
                "\n" * line_offset + text,
                self.input_name,
                ctx=self.ctx,
                verify=not args.disable_verify,
                implicit_module=not args.no_implicit_module,
            ),
        )
        assert isinstance(module, ModuleOp)
        with _parsed_objects_frozen():
            return self._run_passes_and_print(module)

    def _run_passes_and_print(self, module: ModuleOp) -> str:
        args = self.args
        if args.verify_roundtrip:
            self.check_roundtrip(module, "after parsing")
        def dump() -> str:
            return print_module(module, generic=args.print_op_generic, debuginfo=args.print_debuginfo)

        last_text = dump() if args.print_ir_after_change else ""
        names = [p.name for p in self.passes]
        for i, p in enumerate(self.passes):
            label = p.name if names.count(p.name) == 1 else f"{p.name} #{i + 1}"
            self._timed(label, lambda: p.apply(self.ctx, module))
            if not args.disable_verify:
                self._timed("verify", lambda: self.verify(module, p.name))
            if args.verify_roundtrip:
                self.check_roundtrip(module, f"after {p.name}")
            if args.print_ir_after_all or args.print_ir_after_change:
                text_now = dump()
                if args.print_ir_after_all or text_now != last_text:
                    sys.stderr.write(f"// -----// IR Dump After {p.name} //----- //\n{text_now}\n")
                last_text = text_now
        return str(self._timed("print", lambda: self.output(module)))

    def verify(self, module: ModuleOp, after: str) -> None:
        failure = first_verify_failure(module)
        if failure is not None:
            op, e = failure
            raise CompileError(f"'{op.name}' op {e} (after {after})", source_location(op))

    def check_roundtrip(self, module: ModuleOp, when: str) -> None:
        for generic in (False, True):
            form = "generic" if generic else "custom"
            try:
                text = print_module(module, generic=generic, debuginfo=True)
            except Exception as e:  # noqa: BLE001 - xDSL's printer refuses some IR
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

    def output(self, module: ModuleOp) -> str:
        if self.args.emit == "ir":
            return print_module(module, generic=self.args.print_op_generic, debuginfo=self.args.print_debuginfo)
        if self.args.emit == "sbp-report":
            from irflow.dialects.job import JobOp
            from irflow.passes.insert_boxing import sbp_report

            if any(isinstance(op, JobOp) and op.results and op.sbp is None for op in module.walk()):
                raise CompileError("--emit=sbp-report needs every value's SBP: run sbp-infer,insert-boxing first")
            return sbp_report(module) + "\n"
        from irflow.dialects.buffer import ProgramOp
        from irflow.runtime.memory_plan import MemoryPlan

        programs = [op for op in module.walk() if isinstance(op, ProgramOp)]
        if not programs:
            raise CompileError("--emit=memory-plan needs buffer.program ops: run convert-job-to-buffer,plan-memory")
        try:
            return "".join(MemoryPlan.of(p).table() for p in programs)
        except ValueError as e:
            raise CompileError(str(e)) from None


@contextmanager
def _parsed_objects_frozen() -> Iterator[None]:
    """Keep the garbage collector from re-scanning what exists now, the parsed module above all, until the end.

    The module lives until it is printed; a full collection over its millions
    of objects costs about a second at 50k ops, and verifying and printing
    allocate enough to trigger one.  Garbage the passes make is still
    collected; the frozen objects are collectable again afterwards.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _context(allow_unregistered: bool) -> Context:
    """irflow's dialects, and xDSL's (registered lazily) for generic IR of other dialects."""
    ctx = make_context()
    for name, factory in get_all_dialects().items():
        if name not in ctx.registered_dialect_names:
            ctx.register_dialect(name, factory)
    ctx.allow_unregistered = allow_unregistered
    return ctx


def _debug() -> bool:
    return bool(os.environ.get("IRFLOW_DEBUG"))


# ----------------------------------------------------------------- command line


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="irflow-opt",
        description="irflow's modular optimizer driver: read text IR, run passes, print the result.",
    )
    add = parser.add_argument
    add("input_file", nargs="?", default="-", help="the input file, '-' (the default) for stdin")
    add("-o", "--output-file", help="where to write the output (default: stdout)")
    add("-p", "--passes", default="", help="pipeline, mlir-opt syntax: 'a,b{opt=1 other=x}'")
    add(
        "--pass-pipeline",
        default=None,
        help="pipeline in MLIR's textual form: 'builtin.module(a,b{opt=1})'",
    )
    add(
        "--split-input-file",
        action="store_true",
        help=f"--split-input-file[=MARKER]: process each chunk between lines holding only '{SPLIT_MARKER}' "
        "(or MARKER) on its own and go on after a failing chunk; line numbers stay those of the file",
    )
    add(
        "--verify-diagnostics",
        action="store_true",
        help="check the errors against the input's '// expected-error {{...}}' annotations "
        "(@+N, @-N, @above, @below, @unknown; expected-error-re for regular expressions); exit 1 on any "
        "difference",
    )
    add(
        "--verify-roundtrip",
        action="store_true",
        help="after parsing and after every pass, print the IR, parse it back and fail if anything differs",
    )
    add("--mlir-print-ir-after-all", "--print-ir-after-all", dest="print_ir_after_all", action="store_true",
        help="print the IR to stderr after every pass")  # fmt: skip
    add("--mlir-print-ir-after-change", "--print-ir-after-change", dest="print_ir_after_change",
        action="store_true", help="print the IR to stderr after every pass that changed it")  # fmt: skip
    add("--mlir-print-op-generic", "--print-op-generic", dest="print_op_generic", action="store_true",
        help="print every op in the generic form")  # fmt: skip
    add("--mlir-print-debuginfo", "--print-debuginfo", dest="print_debuginfo", action="store_true",
        help="print locations, loc(...)")  # fmt: skip
    add("--time-passes", action="store_true", help="print the wall time of parsing, each pass, verification "
        "and printing to stderr")  # fmt: skip
    add("--disable-verify", action="store_true", help="do not verify the IR after parsing and after each pass")
    add("--allow-unregistered-dialect", action="store_true", help="read ops of dialects irflow-opt does not know")
    add(
        "--no-implicit-module",
        action="store_true",
        help="require one top-level builtin.module instead of wrapping the ops in one",
    )
    add("--list-passes", action="store_true", help="list the passes with their options and exit")
    add(
        "--emit",
        choices=("ir", "memory-plan", "sbp-report"),
        default="ir",
        help="what to print after the passes: the IR, each planned buffer.program's memory plan "
        "(a table of buffers, offsets and lifetimes with the ratio to the lower bound), or per job "
        "the SBP report of sbp-infer,insert-boxing (each boxing, its collective, bytes per step, "
        "the origin of each decision)",
    )
    add(
        "--version",
        action="version",
        version=f"irflow-opt {_version('irflow')} (xDSL {_version('xdsl')})",
    )
    return parser


def _read_input(path: str) -> tuple[bytes, str]:
    if path == "-":
        stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin
        data = stream.read()
        return (data.encode() if isinstance(data, str) else data), "<stdin>"
    with open(path, "rb") as f:
        return f.read(), path


def write_output(path: str | None, text: str) -> bool:
    """Write `text` to the file `path` (stdout if None); False, with the error on stderr, if it cannot be opened."""
    try:
        out = open(path, "w") if path else sys.stdout
    except OSError as e:
        sys.stderr.write(f"irflow-opt: error: {e}\n")
        return False
    try:
        out.write(text)
    finally:
        out.flush()
        if out is not sys.stdout:
            out.close()
    return True


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    marker = SPLIT_MARKER
    for i, arg in enumerate(argv):
        if arg.startswith("--split-input-file="):  # mlir-opt's `=marker` form; argparse cannot take an optional value here
            marker, argv[i] = arg.partition("=")[2], "--split-input-file"
    args = argument_parser().parse_args(argv)
    if args.list_passes:
        sys.stdout.write(list_passes(irflow.passes.available_passes()))
        return 0
    registry = pass_registry()
    try:
        if args.passes and args.pass_pipeline is not None:
            raise ToolError("give the pipeline with -p or with --pass-pipeline, not both")
        if args.pass_pipeline is not None and not _MODULE_PIPELINE.fullmatch(args.pass_pipeline):
            raise ToolError(f"--pass-pipeline expects 'builtin.module(...)', got '{args.pass_pipeline}'")
        passes = parse_pipeline(args.pass_pipeline if args.pass_pipeline is not None else args.passes, registry)
        data, input_name = _read_input(args.input_file)
    except ToolError as e:
        sys.stderr.write(f"irflow-opt: error: {e}\n")
        return 1
    except OSError as e:
        sys.stderr.write(f"irflow-opt: error: {e}\n")
        return 1

    driver = Driver(args, passes, input_name)
    outputs: list[str] = []
    failed = False
    try:
        text = decode_source(data, input_name)
        chunks = list(split_chunks(text, marker if args.split_input_file else None))
    except IrflowError as e:
        chunks, failed = [], True
        sys.stderr.write(str(e) + "\n")
    for chunk, offset in chunks:
        produced: list[Diagnostic] = []
        try:
            outputs.append(driver.run_chunk(chunk, offset))
        except ToolError as e:
            sys.stderr.write(f"irflow-opt: error: {e}\n")
            return 1
        except Exception as e:  # noqa: BLE001 - every failure is a diagnostic; a crash is still no traceback
            produced.append(diagnostic_of(e, input_name))
            if _debug():
                traceback.print_exc()
        if args.verify_diagnostics:
            problems = check_diagnostics(expected_diagnostics(chunk, offset + 1), produced, input_name)
            for problem in problems:
                sys.stderr.write(problem + "\n")
            failed |= bool(problems)
        else:
            for d in produced:
                sys.stderr.write(d.render(input_name) + "\n")
            failed |= bool(produced)

    # As mlir-opt keeps its output file only when the run succeeds, a failure leaves an existing one as it was.
    if not (failed and args.output_file) and not write_output(args.output_file, f"{SPLIT_MARKER}\n".join(outputs)):
        return 1
    if args.time_passes:
        sys.stderr.write(driver.timer.report())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
