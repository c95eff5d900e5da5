# tree.sh: a 50-process tree for the tree-kill-ratio figure, run with sh -c.
# This shell, 7 child shells, and 6 sleeps under each child: 1 + 7 + 42.
# Under the first child shell, one sleep is double-forked into a session of
# its own: the subshell that started it exits, so it is re-parented (to init,
# or to the nearest subreaper) and is no longer anybody's descendant.
# Every member prints its PID on a line, the re-parented one as "escaped PID"
# once the subshell that started it has exited. Sleeps do not keep stdout
# open.
echo $$
i=0
while [ $i -lt 7 ]; do
  sh -c '
    echo $$
    j=0
    while [ $j -lt 6 ]; do
      if [ "$1" = 0 ] && [ $j = 0 ]; then
        p=$(setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!)
        echo "escaped $p"
      else
        sleep 1000 </dev/null >/dev/null 2>&1 &
        echo $!
      fi
      j=$((j+1))
    done
    wait
  ' sh $i &
  i=$((i+1))
done
wait
