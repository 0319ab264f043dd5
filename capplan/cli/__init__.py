"""The ``capplan`` command line (typer): the app (:mod:`.app`), one module per subcommand
(:mod:`.commands`), and the terminal pieces they share (consoles and progress, option checks, tables).
"""
