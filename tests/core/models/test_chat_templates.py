"""Chat templates per agent, with a Llama-3-style tokenizer that adds BOS and whose template
writes BOS itself: templated prompts must reach the model with exactly one BOS."""

from __future__ import annotations

import pytest
from tokenizers import processors

from comlrl.core.commands.launch import DEFAULT_RUN, build_trainer
from comlrl.core.rollout import rollouts
from comlrl.core.rollout.chat import ChatPrompt, encode_prompts
from comlrl.core.testing import build_model, build_tokenizer
from comlrl.reinforce import MAGRPOConfig, MAGRPOTrainer

BOS = "<|begin_of_text|>"
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|eot|>"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
DATA = [{"prompt": "Write a story about a cat."}, {"prompt": "Write a story about the sea."}]


def chat_tokenizer(template: bool = True):
    """The tiny tokenizer with a BOS token it adds to every encoding, and (optionally) a chat
    template that writes that BOS too (as Llama-3, Gemma and Mistral templates do)."""
    tok = build_tokenizer()
    tok.add_special_tokens({"bos_token": BOS})
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, tok.bos_token_id)]
    )
    if template:
        tok.chat_template = TEMPLATE
    return tok


def chat_model_dir(root, template: bool = True) -> str:
    """A tiny model saved with :func:`chat_tokenizer` (its embedding fits the BOS token)."""
    tok = chat_tokenizer(template)
    model = build_model(tok)
    path = root / ("chat-model" if template else "plain-model")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def _reward(c1, c2):
    return [float(len(b) > len(a)) for a, b in zip(c1, c2)]


def _trainer(tmp_path, tokenizers, **overrides):
    model = build_model(tokenizers[0])
    args = dict(
        num_train_epochs=1,
        num_generations=2,
        max_new_tokens=4,
        num_turns=1,
        rollout_buffer_size=2,
        eval_num_samples=0,
        output_dir=str(tmp_path),
    )
    args.update(overrides)
    trainer = MAGRPOTrainer(
        agents=[model, build_model(tokenizers[1])],
        tokenizer=tokenizers,
        train_dataset=DATA,
        reward_func=_reward,
        args=MAGRPOConfig(**args),
    )
    trainer.verbose = False
    return trainer


def _prompt_ids(trainer, agent: int) -> list[int]:
    prompt = trainer.formatters[agent](DATA[0])
    params = rollouts.sampling_params(trainer)
    return trainer.rollout_backend.generate(agent, [prompt], 1, params)[0].prompt_ids


def test_templated_prompt_is_encoded_with_one_bos(tmp_path):
    toks = [chat_tokenizer(), chat_tokenizer()]
    bos = toks[0].bos_token_id
    trainer = _trainer(tmp_path, toks, apply_chat_template="auto", system_prompt="Be brief.")
    prompt = trainer.formatters[0](DATA[0])
    assert (
        prompt == f"{BOS}<|system|>Be brief.<|eot|><|user|>{DATA[0]['prompt']}<|eot|><|assistant|>"
    )
    ids = _prompt_ids(trainer, 0)
    assert ids[0] == bos and ids[1] != bos
    assert ids.count(bos) == 1
    trainer.train()  # the templated prompts train end to end
    assert trainer.env_step > 0


def test_settings_are_per_agent(tmp_path):
    toks = [chat_tokenizer(), chat_tokenizer()]
    trainer = _trainer(
        tmp_path, toks, apply_chat_template=[True, False], system_prompt=[None, "Be long."]
    )
    first, second = (trainer.formatters[i](DATA[0]) for i in range(2))
    assert first.startswith(f"{BOS}<|user|>") and isinstance(first, ChatPrompt)
    assert second == f"Be long.\n\n{DATA[0]['prompt']}"
    # an untemplated prompt gets the tokenizer's BOS, once
    assert _prompt_ids(trainer, 1).count(toks[1].bos_token_id) == 1


def test_off_by_default_and_errors_name_the_field(tmp_path):
    toks = [chat_tokenizer(), chat_tokenizer()]
    trainer = _trainer(tmp_path, toks)
    assert trainer.formatters[0](DATA[0]) == DATA[0]["prompt"]
    with pytest.raises(ValueError, match="apply_chat_template has 3 entries for 2 agents"):
        _trainer(tmp_path, toks, apply_chat_template=[True, True, True])
    plain = [chat_tokenizer(template=False)] * 2
    with pytest.raises(ValueError, match=r"apply_chat_template \(agent 0\) is true.*no chat"):
        _trainer(tmp_path, plain, apply_chat_template=True)
    with pytest.raises(ValueError, match="apply_chat_template must be 'auto', true or false"):
        MAGRPOConfig(apply_chat_template="sometimes")
    with pytest.raises(ValueError, match=r"system_prompt\[1\] must be a string or null"):
        MAGRPOConfig(system_prompt=["a", 3])


def test_text_that_already_starts_with_bos_gets_no_second_one():
    tok = chat_tokenizer()
    bos = tok.bos_token_id
    rows = encode_prompts(tok, [f"{BOS}hello", "hello", ChatPrompt("<|user|>hi")])
    assert [row.count(bos) for row in rows] == [1, 1, 0]
    assert rows[0] == rows[1]


def test_cli_passes_each_agent_tokenizer_to_the_task(tmp_path):
    model_dir = chat_model_dir(tmp_path)
    run = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEFAULT_RUN.items()}
    run["agent_model"] = {"name": model_dir}
    run["task"] = {"name": "length_ratio", "options": {"system_prompt": "Be brief."}}
    run["dataset"] = dict(run["dataset"], train_limit=2, eval_limit=1)
    trainer = build_trainer(run, str(tmp_path / "run"))
    item = trainer.train_dataset[0]
    for agent in range(2):
        prompt = trainer.formatters[agent](item)
        assert prompt.startswith(f"{BOS}<|system|>Be brief.<|eot|><|user|>Write a story")
        ids = _prompt_ids(trainer, agent)
        assert ids[0] == trainer.tokenizers[agent].bos_token_id
        assert ids.count(trainer.tokenizers[agent].bos_token_id) == 1
    # the task and the trainer hold the same tokenizer objects
    assert trainer.formatters[0].func.tokenizer is trainer.tokenizers[0]
