"""Configuration: the shared config base (``base.CommonConfig``), fields that carry their help
text and check (``fields.knob``), knobs shared by some families (``knobs``), the reference-page
generator (``reference``), validators and YAML run files.

Only the validators are imported here, so that importing them stays light.
"""

from comlrl.core.config.validation import (
    check_choice,
    check_int,
    check_number,
    check_optional_int,
    normalize_choice,
)

__all__ = ["check_choice", "check_int", "check_number", "check_optional_int", "normalize_choice"]
