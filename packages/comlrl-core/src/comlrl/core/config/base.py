"""``CommonConfig``: the fields every training family shares, each declared once.

A family config subclasses it and adds only its own fields. Every field carries its help text
and check in its metadata (:func:`~comlrl.core.config.fields.knob`); ``__post_init__`` runs the
checks and then :meth:`CommonConfig._check_relations`, the hook for rules that tie fields
together. A subclass that only changes the default of an inherited field writes the usual
dataclass line (``num_train_epochs: int = 40``): the field keeps the inherited help and check,
and its place in the field order. To change the check too, use
:func:`~comlrl.core.config.fields.retune` (``num_turns: int = retune(1, check=...)``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

from comlrl.core.config.fields import (
    Boolean,
    Choice,
    Custom,
    Devices,
    FallsBackTo,
    Integer,
    Mapping,
    Number,
    Text,
    check_of,
    help_of,
    knob,
)
from comlrl.core.config.knobs import ITEM_SEEDED_SAMPLING
from comlrl.core.distributed import MODES as DISTRIBUTED_MODES
from comlrl.core.logging.completions import check_log_completions
from comlrl.core.logging.sink import check_report_to
from comlrl.core.logprobs.budget import check_token_budget
from comlrl.core.loop.final_eval import check_eval_at_end
from comlrl.core.loop.step_cadence import STEP_UNITS
from comlrl.core.models.setup import check_peft_config
from comlrl.core.monitors.config import check_monitors
from comlrl.core.placement.devices import normalize_parallel_training
from comlrl.core.rewards.caller import CALL_MODES as REWARD_CALL_MODES
from comlrl.core.rollout.backends.registry import (
    check_rollout_backend,
    check_rollout_backend_options,
)
from comlrl.core.rollout.chat import check_chat_settings, check_system_prompts
from comlrl.core.training.schedule import LR_SCHEDULERS, check_schedule

NONFINITE_POLICIES = ("raise", "skip")
# The per-token KL estimators (computed in comlrl.core.models.reference).
KL_ESTIMATORS = ("k1", "k2", "k3")

__all__ = [
    "DISTRIBUTED_MODES",
    "KL_ESTIMATORS",
    "NONFINITE_POLICIES",
    "REWARD_CALL_MODES",
    "CommonConfig",
]

POSITIVE = Number(0.0, min_inclusive=False)


_Config = TypeVar("_Config", bound="CommonConfig")


def _actor_count(config: Any) -> int | None:
    return config.actor_count


@dataclass
class CommonConfig:
    """Settings shared by every family: epochs, optimizer, sampling, turns, evaluation, logging,
    devices, batching and memory budgets, rewards and failure policy.

    Not used on its own: the trainers take a family config (``MAGRPOConfig``, ``IACConfig``,
    ``MADPOConfig``, ...). Every field is validated on construction; an invalid value raises
    ``ValueError`` naming the field and what is valid.
    """

    num_train_epochs: int = knob(
        20, help="Passes over the training set; items keep their order.", check=Integer(1)
    )
    agent_learning_rate: float = knob(
        5.0e-6, help="AdamW learning rate of every agent's optimizer.", check=POSITIVE
    )
    logging_steps: int = knob(
        10,
        help="Fewest steps between two training log records, counted in `steps_unit` "
        "(optimizer steps, as TRL's `logging_steps`); the first record is always logged.",
        check=Integer(1),
    )
    steps_unit: str = knob(
        "optimizer",
        help="What `logging_steps`, `eval_steps` and `save_steps` count: `optimizer` steps "
        "(the most any agent has taken, as TRL counts them) or `env` steps (joint actions "
        "rolled out, the counter 1.4.3's `logging_steps` used).",
        check=Choice(STEP_UNITS),
    )
    num_agents: int | None = knob(
        None,
        help="Number of agents; None takes it from the trainer, a set value must agree with it.",
        check=Integer(1, optional=True),
    )
    parallel_training: str = knob(
        "none",
        help="`none`: every agent on one device; `mp`: each agent on its own device from "
        "`agent_devices`, driven by its own worker thread.",
        check=Custom(lambda _name, value: normalize_parallel_training(value), "none (null), mp"),
    )
    agent_devices: Any = knob(
        None,
        help="Where the agents live: one device for all or one per agent; required with "
        "`parallel_training='mp'`.",
        check=Devices(_actor_count, mp_requires=True),
    )
    max_new_tokens: int = knob(256, help="Most tokens a completion may have.", check=Integer(1))
    temperature: float = knob(
        0.6,
        help="Sampling temperature; the RL families score their log-probs at it too "
        "(log_softmax(logits / T); MADPO's DPO terms at 1).",
        check=POSITIVE,
    )
    top_p: float = knob(
        0.6,
        help="Nucleus sampling: keep the smallest token set with this much probability.",
        check=Number(0.0, 1.0, min_inclusive=False),
    )
    top_k: int | None = knob(
        50,
        help="Sample among the k likeliest tokens; None or 0 turns the filter off.",
        check=Integer(0, optional=True),
    )
    min_p: float | None = knob(
        None,
        help="Min-p sampling: drop tokens whose probability is below this fraction of the "
        "likeliest token's (after temperature); None or 0 turns it off. Like top-p/top-k it "
        "shapes what is sampled; log-probs are still scored as log_softmax(logits / T).",
        check=Number(0.0, 1.0, optional=True),
    )
    repetition_penalty: float | None = knob(
        None,
        help="Divide the logits of tokens already in the prompt or completion by this (>1 "
        "discourages repeats, as in transformers); None or 1.0 turns it off. It changes the "
        "sampling distribution only: log-probs are scored without it, so the sampled tokens "
        "are slightly off-policy for ratio losses.",
        check=Number(0.0, min_inclusive=False, optional=True),
    )
    max_prompt_length: int | None = knob(
        None,
        help="Keep at most this many prompt tokens, cutting from the left (the end of a prompt "
        "is what the completion follows); a warning counts the prompts cut. None keeps every "
        "token.",
        check=Integer(1, optional=True),
    )
    num_turns: int = knob(
        2,
        help="Turns per episode; more than one needs an `external_transition`.",
        check=Integer(1),
    )
    discount: float = knob(
        1.0, help="Discount γ applied to the returns of later turns.", check=Number(0.0, 1.0)
    )
    early_termination_threshold: float | None = knob(
        None,
        help="Stop expanding a rollout-tree node whose mean reward is above this; None grows "
        "every node to `num_turns`.",
        check=Number(optional=True),
    )
    external_prompt_passthrough: bool = knob(
        False,
        help="Use the prompts returned by the external transition as they are, without the "
        "formatters.",
        check=Boolean(),
    )
    eval_interval: int = knob(
        16,
        help="Evaluate before every training item (preference family: update) whose index is a "
        "multiple of this; 0 never evaluates during training (see `eval_at_end`).",
        check=Integer(0),
    )
    eval_steps: int | None = knob(
        None,
        help="Evaluate whenever this many steps (`steps_unit`) have passed since the last "
        "step-cadence evaluation, checked before each unit; replaces the item cadence "
        "`eval_interval`. None: `eval_interval` decides.",
        check=Integer(1, optional=True),
    )
    save_steps: int | None = knob(
        None,
        help="Write a checkpoint whenever this many steps (`steps_unit`) have passed since the "
        "last one, checked after each unit; into `train(checkpoint_dir=...)`, or `<run "
        "dir>/checkpoints` when none is given (then only these and the final checkpoint are "
        "written). None: only `train()`'s checkpoint arguments decide.",
        check=Integer(1, optional=True),
    )
    eval_num_samples: int = knob(
        4,
        help="How many items of the eval set (the first ones) are evaluated; 0 turns eval off.",
        check=Integer(0),
    )
    eval_batch_size: int = knob(1, help="Eval items rolled out together.", check=Integer(1))
    rollout_buffer_size: int = knob(
        2,
        help="Samples (MAGRPO: rollout-tree nodes) buffered per agent before an update drains "
        "them; a global count, split among the processes.",
        check=Integer(1),
    )
    train_batch_size: int | None = knob(
        None,
        help="Samples per optimizer step within one drain, gradients accumulating over them "
        "(preference family: pairs per update); a global count, split among the processes.",
        check=FallsBackTo("rollout_buffer_size", Integer(1)),
    )
    advantage_normalization: bool = knob(
        True, help="Scale the advantages by their standard deviation.", check=Boolean()
    )
    reference_kl_enabled: bool = knob(
        False,
        help="Penalize the KL divergence of each agent from a frozen reference model.",
        check=Boolean(),
    )
    reference_kl_coef: float = knob(
        0.1, help="Weight β of the reference-KL penalty.", check=Number(0.0)
    )
    reference_devices: Any = knob(
        None,
        help="Where the reference models live; None puts each with its agent.",
        check=Devices(_actor_count, when=lambda c: c._uses_reference()),
    )
    seed: int | None = knob(
        None,
        help="Seeds Python, NumPy and torch when training starts; None leaves them alone.",
        check=Integer(0, optional=True),
    )
    shuffle_dataset: bool = knob(
        True,
        help="Visit the training items in a fresh seeded order every epoch (from `seed`, or 0 "
        "when `seed` is None), as TRL's samplers do; a resumed run sees the same order. False "
        "keeps the dataset's own order every epoch, as 1.4.3 did.",
        check=Boolean(),
    )
    output_dir: str | None = knob(
        None,
        help="Run directory for `metrics.jsonl` and run files; None picks "
        "`runs/<algo>-<time>-<pid>`.",
        check=Text("a path string"),
    )
    rollout_batch_size: int | None = knob(
        None,
        help="Dataset items rolled out together (one `generate` call per agent and turn); "
        "None fills one buffer; a global count, split among the processes.",
        check=Integer(1, optional=True),
    )
    generation_batch_size: int | None = knob(
        None,
        help="Most sequences per `generate` call, a memory budget; None sets no cap.",
        check=Integer(1, optional=True),
    )
    decode_fast_path: str = knob(
        "auto",
        help="How rollouts decode (docs/performance.md): `direct` runs each step of a Llama, "
        "Qwen2, Qwen3 or Mistral model as plain tensor ops on its weights, admitted per model by "
        "a probe that its logits equal `forward`'s exactly; `compiled` uses a static KV cache "
        "and a `torch.compile`d step (CUDA graphs on a GPU); `off` calls `model.forward` every "
        "step; `auto` is `compiled` on CUDA and `direct` elsewhere. A model or setting a path "
        "cannot serve decodes through `forward` (with one warning when the path was asked for "
        "by name).",
        check=Choice(("auto", "direct", "compiled", "off")),
    )
    rollout_backend: str = knob(
        "hf",
        help="What samples the rollouts (docs/rollout_backends.md): `hf` decodes with the "
        "agents' own models; `vllm` runs a colocated vLLM engine (the `vllm` extra: `pip "
        "install 'comlrl-core[vllm]'`); or a backend registered by name. Losses always score "
        "with the trainer's own models, so the choice changes speed, not the math.",
        check=Custom(
            lambda name, value: check_rollout_backend(value, name),
            "hf, vllm, or a registered backend name",
        ),
    )
    rollout_backend_options: dict | None = knob(
        None,
        help="The rollout backend's own settings, a mapping (vLLM: `gpu_memory_utilization`, "
        "`enable_sleep_mode`, `weight_sync_interval`, `max_lora_rank`, ...; `hf`: "
        "`mixed_adapters`, default true: adapter agents of one base decode in one mixed call; "
        "see docs/rollout_backends.md); None: the backend's defaults.",
        check=Mapping(),
    )
    logprob_max_tokens: int | str | None = knob(
        "auto",
        help="Most padded tokens per loss forward (micro-batching, gradients accumulated over "
        "the forwards): `auto` derives it from each model's size so one forward's stored "
        "activations stay near 2 GiB on CPU (a fifth of a GPU's memory), about 230 tokens for "
        "Qwen2.5-0.5B in fp32 and more than any buffer of a test-sized model; an int sets it; "
        "None sets no cap.",
        check=Custom(check_token_budget, "'auto', None, or an int >= 1"),
    )
    max_grad_norm: float | None = knob(
        None,
        help="Clip each agent's gradient norm to this per step; None does not clip.",
        check=Number(0.0, min_inclusive=False, optional=True),
    )
    weight_decay: float = knob(0.01, help="AdamW weight decay.", check=Number(0.0))
    lr_scheduler_type: str = knob(
        "constant",
        help="Learning-rate schedule of every optimizer, by its transformers name, stepped "
        "with each optimizer step; every schedule but `constant`, `constant_with_warmup` and "
        "`inverse_sqrt` decays over `max_steps`, which it then requires.",
        check=Choice(LR_SCHEDULERS),
    )
    warmup_steps: int = knob(
        0,
        help="Optimizer steps of linear warmup from 0 to the learning rate; overrides "
        "`warmup_ratio`.",
        check=Integer(0),
    )
    warmup_ratio: float = knob(
        0.0,
        help="Warmup as a fraction of `max_steps` (used when `warmup_steps` is 0).",
        check=Number(0.0, 1.0),
    )
    max_steps: int | None = knob(
        None,
        help="Stop after this many optimizer steps (per agent), checked after each batch of "
        "items; overrides `num_train_epochs`: epochs repeat until it is reached. None: "
        "train `num_train_epochs` epochs.",
        check=Integer(1, optional=True),
    )
    bf16: bool = knob(
        False,
        help="Mixed precision as in TRL and accelerate: every loss forward (agents, critics, "
        "reward models) computes in bfloat16 under `torch.autocast`, while weights, gradients "
        "and optimizer state stay fp32 (an agent loaded in bf16/fp16 is upcast to fp32 master "
        "weights). Rollouts decode in the weights' dtype. Loading weights in bf16 without it "
        "rounds most small updates away (a warning says so).",
        check=Boolean(),
    )
    gradient_checkpointing: bool = knob(
        False,
        help="Recompute each agent's activations in the backward pass instead of storing "
        "them (less memory, more compute); the model's own KV cache is turned off for "
        "training forwards.",
        check=Boolean(),
    )
    peft_config: Any = knob(
        None,
        help="Train adapters instead of full weights: a mapping of `peft` config fields "
        "(`peft_type` defaults to LORA, `task_type` to CAUSAL_LM) or a `peft` config object "
        "such as `peft.LoraConfig`. Agents of one base (one model name repeated, or one model "
        "object) on one device load that base once and get one adapter each on it (named "
        "`agent_<i>`; each optimizer covers its own adapter), and their KL reference is that "
        "base with adapters disabled (no copy); agents of different bases each get their own "
        "`peft.get_peft_model`. Needs the `peft` extra.",
        check=Custom(check_peft_config, "None, a mapping of peft fields, or a peft config"),
    )
    apply_chat_template: Any = knob(
        False,
        help="Wrap each prompt in the agent's chat template: `auto` where the tokenizer has "
        "one, true (required), false (prompts as the formatters write them); one value or a "
        "list with one per agent. Templated prompts are encoded without extra special tokens.",
        check=Custom(
            lambda name, value: check_chat_settings(value, name),
            "'auto', true, false, or a list of them",
        ),
    )
    system_prompt: Any = knob(
        None,
        help="System turn put before each prompt (without a chat template: a paragraph "
        "before it); one string or a list with one per agent (null entries: none).",
        check=Custom(
            lambda name, value: check_system_prompts(value, name),
            "None, a string, or a list of them",
        ),
    )
    reward_call_mode: str = knob(
        "auto",
        help="`batch`: one reward call per batch of joint actions; `per_sample`: one call per "
        "joint action; `auto`: batch, falling back (with a warning) for rewards that return "
        "one value.",
        check=Choice(REWARD_CALL_MODES),
    )
    nonfinite_loss: str = knob(
        "raise",
        help="What a NaN or infinite loss does: `raise`, or `skip` the step (counted and logged).",
        check=Choice(NONFINITE_POLICIES),
    )
    eval_greedy: bool = knob(
        False,
        help="Greedy decoding in evaluation instead of the training sampling settings.",
        check=Boolean(),
    )
    eval_at_end: bool | str = knob(
        "auto",
        help="Evaluate once more after the last update of a completed run, when an eval set "
        "exists and `eval_num_samples` > 0. `auto`: only when the run evaluates during "
        "training (`eval_interval` > 0 or `eval_steps` set), so `eval_interval: 0` evaluates "
        "never, as in CoMLRL 1.4.3; true/false: always/never.",
        check=Custom(check_eval_at_end, "auto, true or false"),
    )
    show_eval_sample: bool = knob(
        False,
        help="After each evaluation, print one eval item (each agent's prompt and completion, "
        "the reward) to the console above the progress bar.",
        check=Boolean(),
    )
    log_completions: int = knob(
        0,
        help="Rows of sampled completions (prompts, each agent's completion, reward, "
        "advantage; preference family: chosen/rejected pairs) written to "
        "`<run dir>/completions.jsonl` (and a W&B table) with every training log record; "
        "0 or false: off, true: 4.",
        check=Custom(check_log_completions, "an int >= 0, or true (4) / false (0)"),
    )
    distributed_mode: str = knob(
        "auto",
        help="Multi-process data parallelism: `auto` follows the launcher's environment, "
        "`single` runs one process, `ddp` replicates the agents, `fsdp` shards them where the "
        "family offers it (docs/distributed.md).",
        check=Choice(lambda cls: cls.distributed_modes),
    )

    item_seeded_sampling: bool = ITEM_SEEDED_SAMPLING(False)
    report_to: Any = knob(
        "auto",
        help="Metric sinks besides `metrics.jsonl` (always written): a list of `wandb`, "
        "`tensorboard` (event files in `<run dir>/tensorboard`) or sinks registered under the "
        "entry-point group `comlrl.sinks`. `auto`: W&B when a `wandb_config` (a run file's "
        "`wandb:` section) is given, as in CoMLRL 1.4.3, else `metrics.jsonl` only; `none`, "
        "`[]` or None: `metrics.jsonl` only. An explicit value always wins over `wandb_config`.",
        check=Custom(
            lambda name, value: check_report_to(value, name), "auto, none, a sink name or list"
        ),
    )
    reference_kl_estimator: str | None = knob(
        None,
        help="Per-token estimator of the KL to the reference, with d = log π_ref − log π: `k1` "
        "(−d), `k2` (d²/2) or `k3` (e^d − d − 1); None: k1 in the reward (unbiased for a "
        "reward; 1.4.3 used k3) and k3 in the loss (where a family offers `beta`).",
        check=Choice(KL_ESTIMATORS, optional=True),
    )
    monitors: Any = knob(
        None,
        help="The reward-hacking monitors (docs/monitors.md): a mapping of `enabled`, the "
        "thresholds `kl_max`, `kl_acceleration_max`, `entropy_min`, `length_drift_max`, "
        "`zero_variance_max`, `clip_fraction_max`, `train_eval_gap_max` (None: logged, not "
        "watched), `window`, `patience` and `stop_on` (monitor names whose crossing "
        "checkpoints and ends the run); a YAML run file's `monitors:` section sets it. None: "
        "the defaults, every monitor logged and only the scale-free thresholds watched.",
        check=Custom(check_monitors, "None, a mapping of monitor settings, or a MonitorsConfig"),
    )

    # The distributed modes a family supports (the preference family replicates its agents).
    distributed_modes: ClassVar[tuple[str, ...]] = DISTRIBUTED_MODES
    # Whether `num_train_epochs` counts the epochs of each online iteration, not the run's.
    epochs_per_iteration: ClassVar[bool] = False
    # Named recipes of field values for `preset()`, and other spellings of their names.
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    preset_aliases: ClassVar[dict[str, str]] = {}

    @classmethod
    def preset(cls: type[_Config], name: str, **fields: Any) -> _Config:
        """The config of the recipe ``name`` (one of :attr:`presets`) with ``fields`` on top.
        A field given here that the recipe sets to another value raises, naming both: a preset
        never overrides a setting silently."""
        key = str(name).strip().lower()
        key = cls.preset_aliases.get(key, key)
        if key not in cls.presets:
            known = ", ".join(sorted(cls.presets)) or "none"
            raise ValueError(f"preset must be one of {known} for {cls.__name__}; got {name!r}.")
        recipe = cls.presets[key]
        for field_name, value in recipe.items():
            if field_name in fields and fields[field_name] != value:
                raise ValueError(
                    f"{field_name}={fields[field_name]!r} conflicts with preset {key!r}, which "
                    f"sets {field_name}={value!r}. Leave {field_name} out to use the preset, or "
                    "build the config without it and set the fields yourself."
                )
        return cls(**{**recipe, **fields})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__annotations__", {})
        for name in own:
            inherited = _inherited_field(cls, name)
            if inherited is None or help_of(inherited) is None:
                continue
            value = cls.__dict__.get(name, dataclasses.MISSING)
            if isinstance(value, dataclasses.Field):
                if help_of(value) is None:
                    # retune(): a new default and maybe a new check; the help is inherited.
                    value.metadata = MappingProxyType({**inherited.metadata, **value.metadata})
            elif value is not dataclasses.MISSING:
                # A new default for an inherited knob keeps its help text and check.
                text = help_of(inherited)
                assert text is not None  # knobs without help were skipped above
                setattr(cls, name, knob(value, help=text, check=check_of(inherited)))

    def __post_init__(self) -> None:
        checks = [(f.name, c) for f in dataclasses.fields(self) if (c := check_of(f)) is not None]
        # Checks that read other fields see those fields already checked and normalized.
        for name, check in sorted(checks, key=lambda item: item[1].reads_config):
            setattr(self, name, check(name, getattr(self, name), self))
        self._check_relations()

    def _check_relations(self) -> None:
        """Rules that tie several fields together; subclasses extend it (calling super)."""
        check_schedule(self)
        check_rollout_backend_options(self.rollout_backend, self.rollout_backend_options)

    def _uses_reference(self) -> bool:
        """Whether reference models are loaded (so ``reference_devices`` is checked)."""
        return self.reference_kl_enabled

    @property
    def actor_count(self) -> int | None:
        """Models that are trained: ``num_agents`` (None until the trainer sets it)."""
        return self.num_agents


def _inherited_field(cls: type, name: str) -> dataclasses.Field | None:
    for base in cls.__mro__[1:]:
        found = vars(base).get("__dataclass_fields__", {}).get(name)
        if found is not None:
            return found
    return None
