from evolve.cli.commands import main

main()
