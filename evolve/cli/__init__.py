"""The `evolve` command: its subcommands (commands.py), the options they share
(options.py), the commands that look back at runs (history.py) and `evolve init`'s
starter folders (scaffold.py, starters/). The only package that prints a command's end
and exits the process; what it runs is evolve.api's and the packages below it.
"""
