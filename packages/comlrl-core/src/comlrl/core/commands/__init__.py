"""The ``comlrl`` subcommands that read finished runs: ``eval`` and ``plot``."""
