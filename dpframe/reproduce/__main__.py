from dpframe.reproduce import main

main()
