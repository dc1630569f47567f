from ptkit_cli import main

main()
