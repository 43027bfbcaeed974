# Print the 20 most frequent words of the text on stdin, one "COUNT WORD" line each, most
# frequent first, ties in alphabetical order. A word is a run of ASCII letters (A-Z, a-z),
# counted lower-cased. count.awk, beside this file, is there to count with if wanted.
# Run as `sh wordfreq.sh < corpus.txt > top.txt`; the run's wall time is the score.
# EVOLVE-BLOCK-START
COUNT="sort"  # @knob choice sort | awk
SORT_MB=8     # @knob int 1..256
export LC_ALL=C
words() {
    tr -cs 'A-Za-z' '\n' | tr 'A-Z' 'a-z'
}
if [ "$COUNT" = awk ]; then
    words | awk -f count.awk
else
    words | sort -S "${SORT_MB}M" | uniq -c
fi | sort -S "${SORT_MB}M" -k1,1nr -k2,2 | head -n 20
# EVOLVE-BLOCK-END
