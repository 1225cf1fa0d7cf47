"""Compatible import path ``comlrl.utils.tokenizer_utils``."""

from comlrl.core.compat.helpers import apply_tokenizer_specials, ensure_tokenizer
from comlrl.core.models import ensure_pad_token, resolve_tokenizers

__all__ = ["apply_tokenizer_specials", "ensure_pad_token", "ensure_tokenizer", "resolve_tokenizers"]
