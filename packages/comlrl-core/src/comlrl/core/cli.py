"""The ``comlrl`` command: train, eval, plot, list.

A user error (a bad setting, a missing file or optional package, a hub id that does not
resolve, a run directory that is taken, a checkpoint that does not fit; see
:mod:`comlrl.core.errors`) prints one line, ``comlrl: error: ...``, and exits with status 2;
``--debug`` shows the traceback instead. Any other exception is a bug and keeps its
traceback. A run stopped by SIGINT/SIGTERM prints the command that continues it and exits with
status 130.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import os
import sys

from comlrl.core.commands.launch import (
    DEFAULT_RUN,
    RunInterrupted,
    carried_fields,
    locate_resume,
    run_training,
)
from comlrl.core.config.redact import redacted_paths
from comlrl.core.config.yaml_io import apply_overrides, deep_merge, load_yaml
from comlrl.core.errors import UserError, is_user_error
from comlrl.core.plugins import available_algorithms, available_tasks, load_algorithm, load_task

_EPILOG = """examples:
  comlrl train                                  # two tiny agents, length-ratio task, MAGRPO
  comlrl train --config examples/length_ratio.yaml
  comlrl train --set magrpo.num_train_epochs=2 --set magrpo.num_turns=2
  comlrl train --override magrpo.num_train_epochs=2 magrpo.num_turns=2
  comlrl train --algo marloo --task length_ratio
  comlrl train --resume                         # continue the newest run from its checkpoint
  comlrl train --resume runs/my-run --set magrpo.num_train_epochs=10
  comlrl eval runs/my-run --samples 4           # greedy and sampled eval of the saved agents
  comlrl eval --agents dir0 dir1 --task length_ratio --out eval.json
  comlrl plot runs/a runs/b --out curves.png     # reward, loss, KL and timing curves
  comlrl list

errors: a bad setting, file or missing package prints one line and exits with status 2
(--debug shows the traceback; a bug in the library always does); Ctrl-C saves a checkpoint,
prints the command that resumes, and exits with 130.
"""

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class _Overrides(argparse.Action):
    """Collects ``--set``/``--override`` values as ``(flag, text)`` pairs, so an error names the
    flag the user typed. With ``const=True`` (``comlrl eval``), a value without ``=`` cannot be
    an override: it is kept in ``stray_paths`` for the positional paths (``--override k=v RUN``
    would otherwise swallow RUN)."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest) or [])
        for value in [values] if isinstance(values, str) else values:
            if self.const and "=" not in value:
                namespace.stray_paths = [*getattr(namespace, "stray_paths", []), value]
            else:
                items.append((option_string, value))
        setattr(namespace, self.dest, items)


def _override_flags(parser: argparse.ArgumentParser, extra_help: str, strays: bool) -> None:
    """``--set KEY=VALUE`` (repeatable) and ``--override KEY=VALUE...``, both into
    ``overrides``."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action=_Overrides,
        default=[],
        metavar="KEY=VALUE",
        help="override one field, e.g. magrpo.num_turns=2 (repeatable; values are YAML)",
    )
    parser.add_argument(
        "--override",
        dest="overrides",
        action=_Overrides,
        nargs="+",
        const=strays,
        metavar="KEY=VALUE",
        help="one or more overrides after one flag, e.g. --override magrpo.num_turns=2 "
        f"seed=1 ({extra_help}combines with --set)",
    )


def _debug_flag(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="show the full traceback of an error instead of one line",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="comlrl",
        description="Cooperative multi-LLM reinforcement learning.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _debug_flag(parser, False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    train = sub.add_parser(
        "train",
        help="train agents (defaults: two tiny offline agents, length ratio, MAGRPO)",
        description="Train cooperating agents. Without arguments: two tiny offline agents learn "
        "the length-ratio task with MAGRPO and write runs/<name>/ (config.yaml, "
        "metrics.jsonl, agents/).",
    )
    train.add_argument(
        "--config",
        metavar="FILE.yaml",
        help="run file in the task-repo YAML schema (merged over the defaults)",
    )
    _override_flags(train, "the task repositories' spelling; ", strays=False)
    _debug_flag(train, argparse.SUPPRESS)
    train.add_argument("--algo", help="registered algorithm (see `comlrl list`)")
    train.add_argument("--task", help="registered task (see `comlrl list`)")
    train.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="PATH|latest",
        help="continue a checkpointed run: a run dir, a checkpoint dir, or 'latest' (the run "
        "named by output.run_name, else the newest run with a checkpoint); the default",
    )
    _eval_parser(sub)
    _plot_parser(sub)
    _debug_flag(
        sub.add_parser("list", help="list installed algorithms and tasks"), argparse.SUPPRESS
    )
    return parser


def _run_options(parser: argparse.ArgumentParser) -> None:
    """--config/--set/--override/--algo/--task, as ``train`` reads them."""
    parser.add_argument("--config", metavar="FILE.yaml", help="run file (task-repo YAML schema)")
    _override_flags(parser, "a value without '=' is a run path; ", strays=True)
    parser.add_argument("--algo", help="registered algorithm (see `comlrl list`)")
    parser.add_argument("--task", help="registered task (see `comlrl list`)")


def _eval_parser(sub) -> None:
    ev = sub.add_parser(
        "eval",
        help="evaluate saved agents on the task's eval split (greedy and sampled)",
        description="Evaluate saved agents: a run dir of `comlrl train` (its agents/ and "
        "config.yaml), or agent dirs with --agents (settings from --config/--task/--set over "
        "the train defaults). Prints mean reward per turn (and the task's pass rates where it "
        "has them), greedy and over K sampled episodes, and writes eval.json.",
    )
    ev.add_argument(
        "paths",
        nargs="*",
        metavar="RUN_OR_AGENTS",
        help="a run directory, or agent directories in agent order",
    )
    ev.add_argument("--agents", nargs="+", default=[], metavar="DIR", help="agent directories")
    ev.add_argument(
        "--samples", type=int, default=4, metavar="K", help="sampled episodes per item (4)"
    )
    ev.add_argument("--split", help="eval split of the task's dataset (default: the run's)")
    ev.add_argument("--limit", type=int, metavar="N", help="evaluate the first N eval items")
    ev.add_argument("--seed", type=int, help="seed of the sampled episodes (default: the run's)")
    ev.add_argument(
        "--out",
        metavar="FILE.json",
        help="where to write the result (default: <run dir>/eval.json, else ./eval.json)",
    )
    _run_options(ev)
    _debug_flag(ev, argparse.SUPPRESS)


def _plot_parser(sub) -> None:
    pl = sub.add_parser(
        "plot",
        help="plot the curves of one or more runs to a PNG (needs comlrl-core[plot])",
        description="Plot metrics.jsonl curves of one or more runs, overlaid: reward per turn, "
        "loss per agent, KL and timings by default. Needs matplotlib: "
        "pip install 'comlrl-core[plot]'.",
    )
    pl.add_argument("runs", nargs="+", metavar="RUN", help="run directories (or metrics.jsonl)")
    pl.add_argument(
        "--out",
        metavar="FILE.png",
        help="the PNG to write (default: <first run>/curves.png)",
    )
    pl.add_argument(
        "--metrics",
        nargs="+",
        metavar="KEY",
        help="metric keys or glob patterns, one panel each (e.g. 'turn_*/reward_mean' "
        "'agent_*/loss'); default: reward, loss, KL and timing panels",
    )
    _debug_flag(pl, argparse.SUPPRESS)


def _compose_run(base: dict, args: argparse.Namespace) -> dict:
    """A copy of ``base`` with --config, --algo, --task and --set applied, in that order."""
    run = copy.deepcopy(base)  # never edit DEFAULT_RUN itself
    written = {}  # what the user's run file sets (the base's own fields may be dropped freely)
    if args.config:
        user = load_yaml(args.config)
        algo_in_file = user.get("algorithm")
        if algo_in_file and str(algo_in_file).lower() != "magrpo":
            run = {k: v for k, v in run.items() if k != "magrpo"}
        run = deep_merge(run, user)
        written = user
    if args.algo:
        run = _switch_algorithm(run, args.algo.lower(), written, args.config)
    if args.task:
        run["task"] = {"name": args.task, "options": {}}
    return _default_tiny_critic(apply_overrides(run, args.overrides))


def _switch_algorithm(
    run: dict, algo: str, written: dict | None = None, source: str | None = None
) -> dict:
    """Point ``run`` at ``algo``: the current algorithm section moves over, keeping the fields
    the new config has. A default field the new config lacks (MAGRPO's ``num_generations``
    means nothing to MADPO) is dropped, and so is a default that means something else there
    (:func:`~comlrl.core.commands.launch.carried_fields`); a field the user's run file ``written``
    (read from ``source``) sets but the new config lacks is an error that names it, since the run
    would silently ignore it."""
    current = str(run.get("algorithm", "magrpo")).lower()
    if algo != current:
        config_cls = load_algorithm(algo).default_config_cls
        fields = {f.name for f in dataclasses.fields(config_cls)}
        section = dict(run.pop(current, None) or {})
        user_section = dict((written or {}).get(current) or {})
        dropped = sorted(set(user_section) - fields)
        if dropped:
            raise UserError(
                f"--algo {algo}: the {current} section of {source} sets {', '.join(dropped)}, "
                f"which {algo} has no field for; remove {'it' if len(dropped) == 1 else 'them'} "
                f"from the run file (or write a {algo}: section for --algo {algo})."
            )
        carried = carried_fields(config_cls)
        run[algo] = {
            k: v for k, v in section.items() if k in carried or (k in fields and k in user_section)
        }
    run["algorithm"] = algo
    return run


def _default_tiny_critic(run: dict) -> dict:
    """An actor-critic algorithm run with the tiny demo agents gets a tiny critic too (real
    agents need their critic named explicitly)."""
    algo = str(run.get("algorithm", "magrpo")).lower()
    if algo == "magrpo" or run.get("critic_model") or run.get("critics"):
        return run
    agent = run.get("agent_model") or {}
    if not (isinstance(agent, dict) and str(agent.get("name", "")).startswith("tiny")):
        return run
    section = run.get(algo) or {}
    accepts = inspect.signature(load_algorithm(algo).__init__).parameters
    if "critic_model" in accepts and section.get("use_separate_critic", True) is not False:
        run = dict(run)
        run["critic_model"] = {"name": agent["name"]}
    return run


def _train(args: argparse.Namespace) -> int:
    run = _compose_run(DEFAULT_RUN, args)
    resume = None
    if args.resume is not None:
        run_dir, resume = locate_resume(args.resume, run)
        saved = os.path.join(run_dir, "config.yaml")
        if not args.config:
            # Without --config the run continues with the settings it was started with
            # (plus any --set, e.g. more epochs).
            if not os.path.isfile(saved):
                raise FileNotFoundError(f"--resume: {run_dir} has no config.yaml; pass --config.")
            run = _compose_run(load_yaml(saved), args)
            hidden = redacted_paths(run)
            if hidden:
                _warn(
                    f"{saved} holds redacted secrets ({', '.join(hidden[:5])}); pass --config "
                    "again if the run needs them (keys belong in environment variables)."
                )
        _say(f"resuming {run_dir} from {resume}")
    try:
        run_dir = run_training(run, resume=resume)
    except RunInterrupted as stop:
        _warn(str(stop))
        return EXIT_INTERRUPTED
    _report_monitors(run_dir)
    _say(f"run written to {run_dir}")
    return 0


def _report_monitors(run_dir: str) -> None:
    """The monitors' summary line and, when one stopped the run, how to continue it."""
    from comlrl.core.commands.run_dir import resume_command
    from comlrl.core.monitors.service import read_summary, summary_line

    summary = read_summary(run_dir)
    if summary is None:
        return
    if summary.get("stop"):
        _warn(f"training stopped by a monitor; continue it with: {resume_command(run_dir)}")
    _say(summary_line(summary))


def _eval(args: argparse.Namespace) -> int:
    import tempfile

    from comlrl.core.commands import eval as evaluation

    paths = [*getattr(args, "stray_paths", []), *args.paths]
    run_dir, agents = evaluation.resolve_sources(paths, args.agents)
    base = evaluation.saved_run(run_dir) if run_dir is not None else DEFAULT_RUN
    run = _compose_run(base, args)
    run = evaluation.eval_run_file(run, agents, args.split, args.limit)
    seed = args.seed if args.seed is not None else int(run.get("seed") or 0)
    with tempfile.TemporaryDirectory(prefix="comlrl-eval-") as work:
        result = evaluation.evaluate_run(
            run, agents, samples=args.samples, seed=seed, work_dir=work
        )
    out = args.out or os.path.join(run_dir or ".", evaluation.EVAL_FILE)
    evaluation.write_result(result, out)
    print(evaluation.format_table(result))
    print(f"written to {out}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from comlrl.core.commands.plotting import default_output, plot_runs

    out = args.out or default_output(args.runs)
    plot_runs(args.runs, out=out, metrics=args.metrics)
    print(f"written to {out}")
    return 0


def _warn(text: str) -> None:
    if os.environ.get("RANK", "0") in ("", "0"):
        print(f"comlrl: {text}", file=sys.stderr)


def _say(text: str) -> None:
    """Print once per run: under a multi-process launcher only rank 0 speaks."""
    if os.environ.get("RANK", "0") in ("", "0"):
        print(text)


def _list() -> int:
    print("algorithms:")
    for name in available_algorithms():
        print(f"  {name}")
    print("tasks:")
    for name in available_tasks():
        desc = getattr(load_task(name), "description", "")
        print(f"  {name:<18} {desc}")
    return 0


def _one_line(exc: BaseException) -> str:
    """``exc``'s message on one line: its lines joined, list bullets ("- ") dropped, and
    everything else (``--flags``, negative numbers) kept as written."""
    text = ""
    for line in str(exc).splitlines():
        line = line.strip()
        if line.startswith("- "):
            line = line[2:].lstrip()
        if line:
            text += (" " if not text or text.endswith(":") else "; ") + line
    return text.strip() or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``comlrl`` command; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "train":
            return _train(args)
        if args.command == "eval":
            return _eval(args)
        if args.command == "plot":
            return _plot(args)
        if args.command == "list":
            return _list()
    except Exception as exc:
        # A bug keeps its traceback; only what the user can fix is shortened (comlrl.core.errors).
        if args.debug or not is_user_error(exc):
            raise
        print(f"comlrl: error: {_one_line(exc)} (--debug shows the traceback)", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(
            "comlrl: interrupted outside the training loop; no checkpoint was written for it.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
