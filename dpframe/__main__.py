"""``python -m dpframe`` runs the command line."""

from dpframe.apps.cli import main

main()
