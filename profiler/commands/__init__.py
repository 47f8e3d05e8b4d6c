"""What each command does, behind the CLI: find the target, compute, write the files, print
through report/, and say the exit status. cli.py only parses arguments and calls one of these;
report/ only renders (tables, exports, figures)."""
