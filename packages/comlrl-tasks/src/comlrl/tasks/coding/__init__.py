"""Code generation: a helper (``aux``) agent and a main agent solve HumanEval-style problems."""
