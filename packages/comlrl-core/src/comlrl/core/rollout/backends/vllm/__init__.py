"""The vLLM rollout backend (``rollout_backend: vllm``; the ``vllm`` extra).

Split so that everything but :mod:`.engine` runs without vLLM: :mod:`.sampling` maps our
sampling settings to ``vllm.SamplingParams`` keyword arguments, :mod:`.adapters` keeps one LoRA
request per agent and bumps it after each update, :mod:`.weights` decides when trained weights
are pushed to an engine, :mod:`.options` checks ``rollout_backend_options``, and
:mod:`.backend` drives any object with the :class:`~.backend.Engine` methods through the
:class:`~comlrl.core.rollout.backends.protocol.RolloutBackend` contract. :mod:`.engine` is the one module
that imports vLLM, and only when an engine is built.
"""
