"""Which errors are the user's to fix, and the optional packages a run needs.

The ``comlrl`` command prints a user error as one line and exits with status 2; anything else
is a bug (in the library, a task or a reward function) and keeps its traceback. A user error is:

- a :class:`UserError` (raised where the library turns a failure it understands, such as a hub
  id that does not resolve or a missing optional package, into a message that names the fix);
- a ``ValueError`` raised by one of the library's own checks, i.e. by a ``raise`` statement in a
  ``comlrl`` module (every setting check names its field and the valid values). A
  ``ValueError`` that comes out of torch, numpy or the standard library, or that the
  interpreter raises inside library code (say, an unpacking that does not fit), is a bug;
- a checkpoint that does not fit, a malformed YAML file, and the file-system errors a path
  given by the user produces (see :data:`FILE_ERRORS`).

``UserError`` subclasses ``ValueError`` (and :class:`MissingPackageError` also ``ImportError``),
so code that catches those keeps working.
"""

from __future__ import annotations

import importlib.util
import linecache
from collections.abc import Iterable
from types import TracebackType

# File-system errors about a path the user named (a run dir that is taken, a file that is not
# there); OSError in general is not one of them (a full disk is not a setting).
FILE_ERRORS = (
    FileExistsError,
    FileNotFoundError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
)


class UserError(ValueError):
    """Input the user can fix; the message names the setting (or package) and the fix."""


class MissingPackageError(UserError, ImportError):
    """An optional package the run asks for is not installed; the message gives the install
    command."""


# package import name -> (what needs it, the extra of comlrl-core that installs it)
OPTIONAL_PACKAGES: dict[str, tuple[str, str]] = {
    "wandb": ("report_to: [wandb]", "wandb"),
    "tensorboard": ("report_to: [tensorboard]", "tensorboard"),
    "matplotlib": ("comlrl plot", "plot"),
    "peft": ("peft_config", "peft"),
    "vllm": ("rollout_backend='vllm'", "vllm"),
}


def missing_package(package: str, needed_by: str | None = None) -> MissingPackageError:
    """The error for ``package`` missing, with the pip command that installs it."""
    default_need, extra = OPTIONAL_PACKAGES.get(package, (package, package))
    return MissingPackageError(
        f"{needed_by or default_need} needs the {package} package, which is not installed; "
        f"install it with `pip install 'comlrl-core[{extra}]'` (or `pip install {package}`)."
    )


def require_packages(packages: Iterable[tuple[str, str]]) -> None:
    """Raise :class:`MissingPackageError` for the first ``(package, needed_by)`` pair whose
    package cannot be found. Looks packages up without importing them, so it is cheap enough to
    run before any model loads."""
    for package, needed_by in packages:
        if importlib.util.find_spec(package) is None:
            raise missing_package(package, needed_by)


def _raised_by_library_check(tb: TracebackType | None) -> bool:
    """Whether the innermost frame of ``tb`` is a ``raise`` statement of a ``comlrl`` module."""
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    if not str(frame.f_globals.get("__name__", "")).startswith("comlrl."):
        return False
    line = linecache.getline(frame.f_code.co_filename, tb.tb_lineno).strip()
    return line.startswith("raise ")


def is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's to fix (one line) rather than a bug (a traceback)."""
    import yaml

    from comlrl.core.checkpoint.errors import CheckpointError

    if isinstance(exc, (UserError, CheckpointError, yaml.YAMLError, *FILE_ERRORS)):
        return True
    if isinstance(exc, ValueError):
        return _raised_by_library_check(exc.__traceback__)
    return False
