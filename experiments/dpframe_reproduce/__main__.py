from dpframe_reproduce import main

main()
