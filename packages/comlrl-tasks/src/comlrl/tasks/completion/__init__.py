"""Code completion: the methods of a class skeleton are split between agents and merged back."""
