"""Every installed task wraps its prompts in each agent's chat template when it is given the
agents' tokenizers (as `comlrl train` gives them), and its prompts encode with one BOS."""

from __future__ import annotations

import pytest

from comlrl.core.plugins import load_task
from comlrl.core.rollout.generation import tokenize_prompts
from comlrl.core.task import TaskSpec
from tests.core.models.test_chat_templates import BOS, chat_tokenizer

TASKS = [
    "length_ratio",
    "length_credit",
    "writing_tldr",
    "writing_arxiv",
    "coding",
    "code_completion",
    "tool_use",
    "travel",
]


@pytest.fixture(scope="module")
def tokenizers():
    return [chat_tokenizer(), chat_tokenizer()]


@pytest.mark.parametrize("name", TASKS)
def test_task_prompts_use_each_agents_template(name, tokenizers):
    task = load_task(name)
    spec = TaskSpec(
        num_agents=2,
        train_limit=1,
        eval_limit=1,
        tokenizer=tokenizers,
        options={"system_prompt": ["First.", "Second."]},
    )
    bundle = task.build(spec)
    item = bundle.train_dataset[0]
    for agent, system in enumerate(["First.", "Second."]):
        prompt = bundle.formatters[agent](item)
        assert prompt.startswith(f"{BOS}<|system|>{system}<|eot|><|user|>")
        assert prompt.endswith("<|assistant|>")
        (ids,) = tokenize_prompts(tokenizers[agent], [prompt])
        assert ids.count(tokenizers[agent].bos_token_id) == 1


@pytest.mark.parametrize("name", ["length_ratio", "writing_tldr"])
def test_template_can_be_switched_off_per_agent(name, tokenizers):
    bundle = load_task(name).build(
        TaskSpec(
            train_limit=1,
            eval_limit=1,
            tokenizer=tokenizers,
            options={"chat_template": ["on", "off"]},
        )
    )
    item = bundle.train_dataset[0]
    assert bundle.formatters[0](item).startswith(BOS)
    assert not bundle.formatters[1](item).startswith(BOS)
    with pytest.raises(ValueError, match="task.options.chat_template has 3 entries"):
        load_task(name).build(TaskSpec(tokenizer=tokenizers, options={"chat_template": ["on"] * 3}))
