"""``python -m dpframe`` runs the command line."""

from dpframe.cli import main

main()
