"""Loading training targets: agents (and later critics, reward and reference models).

A source is a hub id, a local directory, or an already built model object. One object passed
for several agents is parameter sharing: the agents share weights and gradients while each keeps
its own optimizer.

The subpackage's modules: :mod:`.sources` (what a model is given as, and the checks of named
sources), :mod:`.loading` (dtype, load arguments, loading and placing the agents),
:mod:`.tokenizers` (one tokenizer per agent, pad and special tokens), :mod:`.setup` (what the
config does to loaded agents: LoRA, gradient checkpointing, the ``device_map`` check),
:mod:`.adapters` (several agents as PEFT adapters on one shared base), :mod:`.backbone` (the
transformer body and its hidden width, for critics and reward models), :mod:`.reference` (frozen
reference models and the KL estimators to them) and :mod:`.forward_api` (which arguments a model
class's ``forward`` takes).
"""

from comlrl.core.models.loading import (
    DTYPE_NAMES,
    build_agents,
    check_model_config,
    freeze_model,
    load_agents,
    load_causal_lm,
    model_load_kwargs,
    resolve_dtype,
    shares_parameters,
    unique_models,
)
from comlrl.core.models.sources import (
    check_model_source,
    check_model_sources,
    infer_model_name,
    is_model_name,
    resolve_agents,
    resolve_model_sources,
    unresolved_model,
)
from comlrl.core.models.tokenizers import (
    add_special_tokens,
    check_vocab_fits,
    ensure_pad_token,
    resolve_tokenizers,
)

__all__ = [
    "DTYPE_NAMES",
    "add_special_tokens",
    "build_agents",
    "check_model_config",
    "check_model_source",
    "check_model_sources",
    "check_vocab_fits",
    "ensure_pad_token",
    "freeze_model",
    "infer_model_name",
    "is_model_name",
    "load_agents",
    "load_causal_lm",
    "model_load_kwargs",
    "resolve_agents",
    "resolve_dtype",
    "resolve_model_sources",
    "resolve_tokenizers",
    "shares_parameters",
    "unique_models",
    "unresolved_model",
]
