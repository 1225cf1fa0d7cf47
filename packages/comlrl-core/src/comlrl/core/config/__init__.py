"""Configuration helpers: field validation and YAML run files."""

from comlrl.core.config.validation import (
    check_choice,
    check_int,
    check_number,
    check_optional_int,
    normalize_choice,
)

__all__ = ["check_choice", "check_int", "check_number", "check_optional_int", "normalize_choice"]
