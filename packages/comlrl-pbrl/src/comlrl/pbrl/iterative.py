"""MADPOIter and MARLHFIter: preference learning repeated online against a comparator policy.

Each iteration (a stage of the loop):

1. the current policy (the *target*) samples ``preference_num_candidates`` joint candidates per
   item and the comparator ``comparator_num_candidates``; both are scored by the task reward (or,
   in MARLHFIter with ``preference_scoring_reward="reward_model"``, by the previous reward model);
2. target-vs-comparator pairs with a reward gap are selected per item;
3. the iteration's pairs are registered with the replay store, which returns the training pairs
   (``preference_replay_mode``), and the reward distribution is logged when asked;
4. MADPOIter runs ``num_train_epochs`` DPO epochs on them; MARLHFIter trains the reward model on
   them and then runs ``num_train_epochs`` RL epochs;
5. a policy snapshot is saved when the history comparator (or ``policy_checkpoint_dir``) needs it.

Steps 1–3 and 5 are the trainers' ``online`` collaborator (:mod:`comlrl.pbrl.online`).
"""

from __future__ import annotations

from comlrl.core.loop import units_of
from comlrl.pbrl import candidates
from comlrl.pbrl.base import PreferenceTrainerBase
from comlrl.pbrl.iter_config import MADPOIterConfig, MARLHFIterConfig
from comlrl.pbrl.madpo import MADPOTrainer
from comlrl.pbrl.marlhf import MARLHFTrainer
from comlrl.pbrl.online import OnlineIterations, check_iterative_inputs
from comlrl.pbrl.pairs import PreferencePair
from comlrl.pbrl.rl_phase import rl_units

ITERATIVE_RUN_CONFIG_KEYS = PreferenceTrainerBase.run_config_keys + (
    "num_online_iterations",
    "num_iterations",
    "comparator_policy",
    "comparator_generation_mode",
    "preference_replay_mode",
    "comparator_num_candidates",
)


class MADPOIterTrainer(MADPOTrainer):
    """Iterative (online) MADPO: every iteration samples target and comparator candidates,
    selects pairs (with replay), and runs ``num_train_epochs`` DPO epochs on them.

    With ``reference_free=False`` the reference of an iteration is the policy at its start (or
    ``reference_model_name``); reference log-probs are computed once per iteration.

    Attributes:
        online: the iterations' comparators, replay, drift logs, snapshots and training pairs
            (:class:`~comlrl.pbrl.online.OnlineIterations`).
    """

    algorithm_name = "MADPOIter"
    default_config_cls = MADPOIterConfig
    checkpoint_kind = "madpo_iter"
    run_config_keys = ITERATIVE_RUN_CONFIG_KEYS

    def setup(self, inputs) -> None:
        """MADPO's set-up, then the comparators, replay and drift logging."""
        api_client = check_iterative_inputs(self, inputs)  # before any model is loaded
        super().setup(inputs)
        self.online = OnlineIterations(self, api_client, self.pair_scores)

    def pair_scores(self, texts, actor_prompts, items):
        """Task rewards of candidates for pairing (see
        :func:`comlrl.pbrl.candidates.score_joint_agents`)."""
        return candidates.score_joint_agents(self, texts, actor_prompts[0], items)

    # ------------------------------------------------------------------ the contract
    def prepare(self, stage: int):
        """Sample iteration ``stage``'s pairs (once: a restored iteration has them) with their
        reference log-probs, then its ``num_train_epochs`` epochs of DPO updates."""
        sampled = self.prepared_stage != stage
        if sampled:
            selected = self.online.selected_pairs(self, stage)
            if not self.args.reference_free:
                for pair in selected:
                    pair.reference_logps = None
                self.attach_reference_logps_sharded(selected)
            self.online.pairs = list(selected)
            self.prepared_stage = stage
        units = []
        for epoch in range(self.args.num_train_epochs):
            key = stage * 100_003 + epoch
            units += self.dpo_units(self.online.pairs, key)
        return units_of(units, "preference_data" if sampled else None)

    def collect(self, unit: list[int]) -> list[PreferencePair]:
        """This rank's share of the unit's pairs of the current iteration."""
        self.units_done += 1
        return candidates.rank_share([self.online.pairs[i] for i in unit], self.dist)


class MARLHFIterTrainer(MARLHFTrainer):
    """Iterative (online) MARLHF: every iteration samples target and comparator candidates,
    selects pairs (with replay), trains the reward model on them (restarting from its initial
    weights unless ``reward_model_warm_start``), and runs ``num_train_epochs`` RL epochs.

    The RL trainer (its optimizers and any critics) persists across iterations.

    Attributes:
        online: the iterations' comparators, replay, drift logs, snapshots and training pairs
            (:class:`~comlrl.pbrl.online.OnlineIterations`).
    """

    algorithm_name = "MARLHFIter"
    default_config_cls = MARLHFIterConfig
    run_config_keys = ITERATIVE_RUN_CONFIG_KEYS + ("rl_algorithm",)
    checkpoint_kind = "marlhf_iter"

    def setup(self, inputs) -> None:
        """MARLHF's set-up, then the comparators, replay and drift logging."""
        api_client = check_iterative_inputs(self, inputs)  # before any model is loaded
        super().setup(inputs)
        self.online = OnlineIterations(self, api_client, self.pair_scores)
        self._rm_initial_state = None
        if not self.args.reward_model_warm_start:
            self._rm_initial_state = {
                k: v.detach().to("cpu", copy=True)
                for k, v in self.reward_model.state_dict().items()
            }

    def pair_scores(self, texts, actor_prompts, items):
        """Scores of candidates for pairing: the task reward, or with
        ``preference_scoring_reward="reward_model"`` the reward model once it is trained (raw
        task rewards then only when the drift logs need them)."""
        a = self.args
        if a.preference_scoring_reward != "reward_model" or not self.reward_model_trained:
            return candidates.score_joint_agents(self, texts, actor_prompts[0], items)
        raw = None
        if self.online.reward_histogram is not None:
            raw, _ = self.score_joint(texts, actor_prompts[0], items)
        scores = []
        for j in range(len(items)):
            k = len(texts[0][j])
            prompts = [[actor_prompts[i][j]] * k for i in range(self.num_agents)]
            comps = [list(texts[i][j]) for i in range(self.num_agents)]
            scores.append(self.reward_model_scores(prompts, comps))
        return raw, scores, None

    # ------------------------------------------------------------------ the contract
    def prepare(self, stage: int):
        """Sample iteration ``stage``'s pairs and fit the reward model on them (once: a
        restored iteration has them), then its ``num_train_epochs`` RL epochs."""
        sampled = self.prepared_stage != stage
        if sampled:
            selected = self.online.selected_pairs(self, stage)
            if self._rm_initial_state is not None:
                self.reward_model.load_state_dict(self._rm_initial_state)
                self.reward_optimizer = self._new_reward_optimizer()
            self.num_preference_pairs = len(selected)
            if selected:
                self.fit_reward_model(selected)
            self.prepared_stage = stage
        units = []
        if self.num_preference_pairs and self.reward_model_trained:
            for _ in range(self.args.num_train_epochs):
                units += rl_units(self)
        return units_of(units, "preference_data" if sampled else None)


__all__ = ["MADPOIterTrainer", "MARLHFIterTrainer"]
