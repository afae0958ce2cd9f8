# Chapter 2's trace: a backtrace at each step of an Active Message through
# AM's core, on one rank (requests it sends, requests it serves, answers).
#
#   build/bin/viarun -n 2 --tag-output -- docs/course/traces/on-rank.sh 0 \
#       gdb -q -batch -x docs/course/traces/active-messages.gdb --args build/bin/am_counter --requests 1 --bytes 64
set pagination off
set breakpoint pending on
set print thread-events off
# Sending: a request takes a credit (a slot of the window), a reply answers one.
break am::detail::Core::send_request
break am::detail::Core::send_reply
# Receiving: every message, then by kind.
break am::detail::Core::dispatch
break am::detail::Core::handle_request
break am::detail::Core::handle_reply
# Deferred requests travel in bundles.
break am::detail::Core::flush
break am::detail::Core::run_bundle
commands 1-7
  silent
  echo \n----\n
  bt 6
  continue
end
run
