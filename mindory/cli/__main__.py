from mindory.cli import main

main()
