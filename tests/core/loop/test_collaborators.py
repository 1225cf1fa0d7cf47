"""The trainer's collaborators (``reporting``, ``checkpointing``, ``monitors``, ``sync``,
``timing``, ``run_state``) are built with what they read and keep no way back to the trainer:
no attribute, no bound method of it, no closure over it, after a trained run too. What changes
during a run comes to them as arguments from the loop."""

import functools
import types

import pytest
import torch

COLLABORATORS = ("reporting", "checkpointing", "monitors", "sync", "timing", "run_state")


def paths_to(obj, target, path, depth=4, seen=None):
    """The attribute paths from ``obj`` that reach ``target``: through instance attributes,
    containers, bound methods, partials and closures (``depth`` hops at most)."""
    seen = set() if seen is None else seen
    if obj is target:
        return [path]
    if depth == 0 or id(obj) in seen or isinstance(obj, (torch.nn.Module, torch.Tensor, type)):
        return []
    seen.add(id(obj))
    children = []
    if isinstance(obj, types.MethodType):
        children.append((".__self__", obj.__self__))
    elif isinstance(obj, functools.partial):
        children += [("func", obj.func), *((f"args[{i}]", a) for i, a in enumerate(obj.args))]
    elif isinstance(obj, types.FunctionType):
        cells = obj.__closure__ or ()
        children += [(f"<closure {i}>", c.cell_contents) for i, c in enumerate(cells)]
    elif isinstance(obj, dict):
        children += [(f"[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple, set)):
        children += [(f"[{i}]", v) for i, v in enumerate(obj)]
    elif hasattr(obj, "__dict__") and not isinstance(obj, types.ModuleType):
        children += [(f".{k}", v) for k, v in vars(obj).items()]
    found = []
    for name, child in children:
        found += paths_to(child, target, path + name, depth - 1, seen)
    return found


def back_pointers(trainer):
    found = []
    for name in COLLABORATORS:
        found += paths_to(getattr(trainer, name), trainer, name)
    return found


def test_the_finder_sees_a_back_pointer():
    """The check can fail: a collaborator holding the trainer, or a bound method of it."""
    trainer = types.SimpleNamespace()
    holder = types.SimpleNamespace(owner=trainer, hooks=[trainer.__repr__])
    assert paths_to(holder, trainer, "x") == ["x.owner"]

    class Host:
        def describe(self):
            return {}

    host = Host()
    assert paths_to(types.SimpleNamespace(describe=host.describe), host, "x") == [
        "x.describe.__self__"
    ]
    assert paths_to(types.SimpleNamespace(cb=lambda: host), host, "x") == ["x.cb<closure 0>"]


@pytest.mark.parametrize("family", ["magrpo", "iac"])
def test_no_collaborator_reaches_the_trainer_after_a_run(tmp_path, family):
    from comlrl.core.testing import tiny_pair

    m0, tok = tiny_pair(seed=0)
    m1, _ = tiny_pair(seed=1)
    common = dict(
        num_train_epochs=1,
        num_generations=2,
        num_turns=1,
        max_new_tokens=4,
        rollout_buffer_size=2,
        logging_steps=1,
        output_dir=str(tmp_path / "run"),
        seed=0,
    )
    prompts = [{"prompt": f"Write about {t}."} for t in ("a cat", "the sea")]

    def reward(a, b):
        return [float(len(x) - len(y)) for x, y in zip(a, b)]

    if family == "magrpo":
        from comlrl.reinforce import MAGRPOConfig as Config
        from comlrl.reinforce import MAGRPOTrainer as Trainer
    else:
        from comlrl.ac import IACConfig as Config
        from comlrl.ac import IACTrainer as Trainer

        common.pop("num_generations")
        common["use_separate_critic"] = False
    trainer = Trainer(
        agents=[m0, m1],
        tokenizer=tok,
        train_dataset=prompts,
        reward_func=reward,
        args=Config(**common),
    )
    trainer.verbose = False
    assert back_pointers(trainer) == []
    trainer.train()
    assert trainer.reporting.logger is not None  # the run logged through the collaborator
    assert back_pointers(trainer) == []


def test_the_rl_phase_of_marlhf_shares_collaborators_without_back_pointers(tmp_path):
    """MARLHF's RL phase reports through MARLHF's ``reporting`` and counts in its run state;
    neither reaches back to either trainer, and the shared reporting times with the timer both
    trainers now use."""
    from tests.pbrl.helpers import small_marlhf

    trainer = small_marlhf(tmp_path / "run", num_train_epochs=1)
    trainer.train()
    rl = trainer.rl_trainer
    assert rl.reporting is trainer.reporting and rl.run_state is trainer.run_state
    assert trainer.reporting.timing is trainer.timing is rl.timing
    assert back_pointers(trainer) == []
    assert [p for name in COLLABORATORS for p in paths_to(getattr(trainer, name), rl, name)] == []
