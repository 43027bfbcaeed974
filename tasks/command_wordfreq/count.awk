# Count the words on stdin, one a line: print "COUNT WORD" once for each distinct word.
# EVOLVE-BLOCK-START
{ count[$0]++ }
END { for (word in count) print count[word], word }
# EVOLVE-BLOCK-END
