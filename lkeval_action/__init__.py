"""The GitHub Action's side of the container, standard library only (see ``entrypoint.py``).

``inputs``: the ``INPUT_*`` variables → lkeval's argv; ``install``: the agent's dependencies,
built outside the checkout; ``workspace``: hands what the container wrote back to the
runner's user; ``processes``: children, signals and PID 1's duties; ``commands``: workflow
commands on stdout.
"""
