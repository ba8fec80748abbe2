from trainyard.cli.entry import main

main()
