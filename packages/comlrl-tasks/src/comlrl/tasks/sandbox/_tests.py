"""Run a job's tests in the judge against the worker's exported names (stdlib only)."""

import ast
import builtins
import importlib

import _judge
import _verdict
import _wire

MESSAGE_LIMIT = 400
SandboxTimeout = _judge.SandboxTimeout


def _short(exc):
    try:
        message = f"{exc}"
    except Exception as error:  # an exception whose text cannot be made
        message = f"<{type(error).__name__} while formatting the error>"
    return _verdict.text(message, MESSAGE_LIMIT)


def _outcome(name, exc):
    if exc is None:
        return {"name": name, "passed": True}
    timed_out = isinstance(exc, SandboxTimeout)
    message = _short(exc)
    if isinstance(exc, AssertionError) and not message:
        message = "assertion failed"
    return {
        "name": name,
        "passed": False,
        "timed_out": timed_out,
        "error_type": "Timeout"
        if timed_out
        else _verdict.text(getattr(exc, "type_name", type(exc).__name__), 100),
        "message": message,
    }


def _skipped(name):
    return {
        "name": name,
        "passed": False,
        "error_type": "Skipped",
        "message": "not run after repeated timeouts or crashes",
    }


def _explain_assert(source, namespace, seconds):
    """For a failed ``assert left == right``, say what ``left`` evaluated to."""
    try:
        node = ast.parse(source).body[0]
    except (SyntaxError, IndexError):
        return ""
    test = getattr(node, "test", None)
    if not (
        isinstance(node, ast.Assert)
        and isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Eq, ast.Is))
    ):
        return ""
    try:
        with _judge.alarm(seconds):
            got = eval(compile(ast.Expression(test.left), "<assert>", "eval"), namespace)
        shown = repr(got)
    except BaseException:  # the left side itself fails; the plain message is enough then
        return ""
    if len(shown) > MESSAGE_LIMIT // 2:
        shown = shown[: MESSAGE_LIMIT // 2 - 3] + "..."
    return f"expected {ast.unparse(test.comparators[0])}, got {shown}"


def _run_one(session, code_obj, namespace, seconds):
    """Run one test in the judge; a timeout stops the worker, which the next test restarts."""
    try:
        with _judge.alarm(seconds):
            exec(code_obj, namespace)
    except BaseException as exc:  # the test may raise anything the generated code raised
        if isinstance(exc, SandboxTimeout):
            session.link.kill()
        return exc
    return None


def _run_snippets(job, session, namespace, limits):
    outcomes, troubles = [], 0
    for index, test in enumerate(job.get("tests", [])):
        name = test.get("name") or f"test {index + 1}"
        counts = test.get("counts", True)
        if troubles >= limits["max_test_timeouts"]:
            if counts:
                outcomes.append(_skipped(name))
            continue
        if not session.restart_if_dead():
            troubles += 1
            error = _judge.WorkerGone("the generated code's process could not be restarted")
        else:
            code_obj = compile(test["code"], f"<{name}>", "exec")
            error = _run_one(session, code_obj, namespace, limits["test_timeout"])
        if isinstance(error, SandboxTimeout) or session.link.dead:
            troubles += 1
        if counts:
            outcome = _outcome(name, error)
            if isinstance(error, AssertionError) and not str(error):
                explained = _explain_assert(test["code"], namespace, limits["test_timeout"])
                outcome["message"] = explained or outcome["message"]
            outcomes.append(outcome)
    return outcomes


class ReportedError(Exception):
    """A failure unittest already formatted; keeps the original exception's type name."""

    def __init__(self, type_name, message):
        super().__init__(message)
        self.type_name = type_name


def _reported_error(formatted):
    """Turn unittest's formatted traceback into an exception carrying its type and message."""
    lines = formatted.strip().splitlines()
    last = lines[-1] if lines else "test failed"
    head, sep, message = last.partition(": ")
    type_name = head.rsplit(".", 1)[-1] if sep and " " not in head else "Error"
    if type_name == "SandboxTimeout":
        return SandboxTimeout(message)
    return ReportedError(type_name, message if sep else last)


def _run_unittests(job, session, namespace, limits):
    import unittest  # already loaded by the harness before Landlock

    with _judge.alarm(limits["test_timeout"]):
        exec(compile(job["unittest_source"], "<tests>", "exec"), namespace)
    loader = unittest.TestLoader()
    cases = sorted(
        (
            value
            for value in namespace.values()
            if isinstance(value, type)
            and issubclass(value, unittest.TestCase)
            and value.__module__ == namespace["__name__"]
        ),
        key=lambda cls: cls.__name__,
    )
    outcomes, troubles = [], 0
    for case in cases:
        for method in loader.getTestCaseNames(case):
            name = f"{case.__name__}.{method}"
            if troubles >= limits["max_test_timeouts"]:
                outcomes.append(_skipped(name))
                continue
            if not session.restart_if_dead():
                troubles += 1
                outcomes.append(_outcome(name, _judge.WorkerGone("could not restart the code")))
                continue
            result = unittest.TestResult()
            error = None
            try:
                with _judge.alarm(limits["test_timeout"]):
                    case(method).run(result)
            except BaseException as exc:  # a timeout raised outside unittest's own handlers
                error = exc
            problems = result.errors + result.failures
            if error is None and problems:
                error = _reported_error(problems[0][1])
            if error is None and result.testsRun != 1:
                error = RuntimeError("test did not run")
            if isinstance(error, SandboxTimeout):
                session.link.kill()
            if isinstance(error, SandboxTimeout) or session.link.dead:
                troubles += 1
            outcomes.append(_outcome(name, error))
    return outcomes


def _setup_failure(first):
    error = first.get("setup_error") if type(first) is dict else None
    if type(error) is not dict:
        return {"status": "crashed", "setup_error": "the generated code's process ended"}
    names = error.get("raise") if type(error.get("raise")) is list else []
    names = [n for n in names[:64] if type(n) is str] or ["Exception"]
    return {
        "status": "setup_error",
        "setup_error_type": "MemoryError"
        if "MemoryError" in names
        else _verdict.text(names[0], 100),
        "setup_error": _verdict.text(error.get("message"), MESSAGE_LIMIT),
    }


# Modules a test may use under a name the generated code imported (HumanEval tests call
# ``math`` from the prompt's imports, say). Importing runs code in the judge, so a module name
# the worker sends is imported only from this list (side-effect-free standard modules), and
# only when a test reads that name.
MODULES = frozenset(
    {
        "array", "bisect", "calendar", "cmath", "collections", "collections.abc", "copy",
        "datetime", "decimal", "fractions", "functools", "hashlib", "heapq", "itertools", "json",
        "math", "numbers", "operator", "os", "posixpath", "random", "re", "statistics", "string",
        "sys", "textwrap", "time", "typing", "unicodedata",
    }
)  # fmt: skip


def _names_in(source):
    """(names the code reads, names it imports) of one test source; empty when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(), set()
    read, imported = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            read.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                imported.add(alias.asname or alias.name.split(".")[0])
    return read, imported


def wanted_names(job):
    """The names of the generated code the tests may see.

    The entry point, and every name a test reads that is neither a builtin nor one the tests
    import themselves: a sample defining ``abs`` must not change what ``abs`` means to a test.
    """
    sources = [t.get("code", "") for t in job.get("tests", [])]
    if job.get("unittest_source"):
        sources.append(job["unittest_source"])
    read, imported = set(), set()
    for source in sources:
        more_read, more_imported = _names_in(source)
        read |= more_read
        imported |= more_imported
    wanted = read - imported - set(dir(builtins))
    if job.get("entry_point"):
        wanted.add(job["entry_point"])
    return wanted


def _run_context(job, namespace, seconds):
    """Run the task's own definitions (a prompt's helpers and imports) here, in the judge.

    Returns the names they defined: the tests see these, never the generated code's versions,
    so a sample cannot pass a test by redefining a helper the test calls.
    """
    source = job.get("context") or ""
    if not source.strip():
        return set()
    before = set(namespace)
    with _judge.alarm(seconds):
        exec(compile(source, "<task context>", "exec"), namespace)
    return set(namespace) - before


def _bind_exports(names, session, namespace, wanted):
    """Bind the worker's names the tests refer to; a name the worker made up is a fault."""
    for name in wanted:
        data = names.get(name)
        if data is None and name not in names:
            continue  # the tests define it, or a missing name fails the test that reads it
        if type(data) is dict and set(data) == {"m"}:
            module = data["m"]
            if type(module) is not str or module not in MODULES:
                raise _wire.WireError(f"module {str(module)[:40]!r} is not one tests may use")
            namespace[name] = importlib.import_module(module)
            continue
        namespace[name] = _wire.decode(data, session.remote)


def run(job, session, namespace):
    """Start the worker, bind what the setup defined, run the tests; return the report fields.

    Every step that handles the worker's data is guarded against any exception, so a sample
    that confuses the judge gets a verdict (its failure, with the reason in ``fault``).
    """
    try:
        return _run(job, session, namespace)
    except BaseException as exc:  # the last line of defence: a verdict is always produced
        return {
            "status": "crashed",
            "fault": "judge_error",
            "setup_error": f"the judge could not score this sample: {type(exc).__name__}",
        }


def _run(job, session, namespace):
    limits = job["limits"]
    try:
        first = session.start()
    except SandboxTimeout:
        return {"status": "setup_error", "setup_error_type": "Timeout", "setup_error": "timed out"}
    except _judge.WorkerGone as exc:
        return {"status": "crashed", "setup_error": str(exc), "fault": session.fault}
    if type(first) is not dict or type(first.get("ready")) is not dict:
        return _setup_failure(first)
    try:
        trusted = _run_context(job, namespace, limits["test_timeout"])
    except BaseException as exc:  # the task's own definitions failed; nothing can pass
        session.close()
        return {
            "status": "setup_error",
            "setup_error_type": type(exc).__name__,
            "setup_error": "the task's context could not be run: " + _short(exc),
        }
    try:
        _bind_exports(first["ready"], session, namespace, wanted_names(job) - trusted)
    except Exception as exc:  # a forged or malformed export: the sample's fault
        session.close()
        return {
            "status": "crashed",
            "fault": "bad_export",
            "setup_error": f"bad names from the worker: {_short(exc)}",
        }
    try:
        if job.get("unittest_source"):
            tests = _run_unittests(job, session, namespace, limits)
        else:
            tests = _run_snippets(job, session, namespace, limits)
    except BaseException as exc:  # the test module itself failed to load
        return {
            "status": "setup_error",
            "setup_error_type": type(exc).__name__,
            "setup_error": "tests could not be loaded: " + _short(exc),
            "fault": session.fault,
        }
    return {"status": "ok", "tests": tests, "fault": session.fault}
