"""``python -m dcop.agents`` is ``dcop-agent`` (the console script runs :func:`main` too)."""

from dcop.blas import one_blas_thread


def main() -> None:
    """``dcop-agent``: one BLAS thread (set before NumPy loads), then the agent's command line."""
    one_blas_thread()
    from dcop.agents.cli import main as agent_main

    agent_main()


if __name__ == "__main__":
    main()
