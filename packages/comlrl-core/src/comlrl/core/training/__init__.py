"""The update side of a training step: the policy update of the policy families
(``policy_update``), the one optimizer-step skeleton (``train_step``), the optimizer and its
one step (``optim``), the learning-rate schedule (``schedule``), bf16 compute (``precision``)
and dropout switched off for scoring (``dropout``)."""
