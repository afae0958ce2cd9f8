# Chapter 1's trace: a backtrace at each step of one message's path through
# the engine and the provider (shm or tcp). The libraries export these
# symbols, so a Release build will do; functions the compiler inlined do not
# stop (wake, for one: see its futex call with strace instead).
#
#   build/bin/viarun -n 2 --tag-output -- docs/course/traces/on-rank.sh 1 \
#       gdb -q -batch -x docs/course/traces/message-path.gdb --args build/bin/vipl_pingpong 1 64
set pagination off
set breakpoint pending on
set print thread-events off
# The program's calls (VIPL).
break VipPostSend
break VipRecvWait
# The engine: the send queue, frames out, frames in, completion.
break via::ViImpl::post_send
break via::ViImpl::send_frame
break via::ViImpl::handle_frame
break via::ViImpl::deliver
break via::ViImpl::publish
# The shm provider's link: cells in the peer's ring.
break via::shm::ShmLink::try_send
break via::shm::ShmLink::peek
# The tcp provider's link: frames on a TCP stream.
break via::tcp::TcpLink::try_send
break via::tcp::TcpLink::receive
commands 1-11
  silent
  echo \n----\n
  bt 7
  continue
end
run
