-- viastack.lua: a Wireshark/tshark dissector for viastack's VIA traces.
--
--   VIASTACK_TRACE=via:run.pcap viarun -n 2 ./program     (run.rank0.pcap, run.rank1.pcap)
--   wireshark -X lua_script:viastack.lua run.rank0.pcap
--   tshark -X lua_script:viastack.lua -r run.rank0.pcap -Y 'viastack_am.kind == 1'
--
-- or copy this file into Wireshark's personal plugin folder (Help > About >
-- Folders), e.g. ~/.local/lib/wireshark/plugins/, to have it always.
--
-- A trace record (link type DLT_USER0, 147; via/src/trace/frame_trace.hpp
-- defines it) is one event of one VI: a frame the VI sent or received, RDMA
-- moved by single copy, or a step of a connection. Inside a frame's payload,
-- by the service its connection was made for:
--   "am"   an Active Message (am/src/wire.hpp): header, arguments,
--          acknowledgements, payload; a bundle's requests or replies as items
--   "mpi"  the mesh's credit header (via/src/mesh/mesh_peer.hpp), then MPI's
--          wire header (mpi/src/transport.hpp)
--   "utcp" an IPv4 packet, handed to Wireshark's own IP dissector
-- Every field is little-endian.

local via = Proto("viastack", "viastack VIA trace")
local am = Proto("viastack_am", "viastack Active Message")
local mpi = Proto("viastack_mpi", "viastack MPI message")

local EVENTS = {
  [1] = "frame sent", [2] = "frame received", [3] = "RDMA write by single copy",
  [4] = "RDMA read by single copy", [5] = "connect request", [6] = "peer connect request",
  [7] = "connect request arrived", [8] = "request accepted", [9] = "request rejected",
  [10] = "connected", [11] = "connect failed", [12] = "disconnected", [13] = "VI error",
}
local RELIABILITY = { [0] = "none yet", [1] = "unreliable", [2] = "reliable delivery", [4] = "reliable reception" }
local VIP_ERRORS = {
  [0] = "VIP_ERROR_POST_DESC", [1] = "VIP_ERROR_CONN_LOST", [2] = "VIP_ERROR_RECVQ_EMPTY",
  [3] = "VIP_ERROR_VI_OVERRUN", [4] = "VIP_ERROR_RDMAW_PROT", [5] = "VIP_ERROR_RDMAW_DATA",
  [6] = "VIP_ERROR_RDMAW_ABORT", [7] = "VIP_ERROR_RDMAR_PROT", [8] = "VIP_ERROR_COMP_PROT",
  [9] = "VIP_ERROR_RDMA_TRANSPORT", [10] = "VIP_ERROR_CATASTROPHIC",
}
local VIP_RETURNS = {
  [0] = "VIP_SUCCESS", [1] = "VIP_NOT_DONE", [2] = "VIP_INVALID_PARAMETER", [3] = "VIP_ERROR_RESOURCE",
  [4] = "VIP_TIMEOUT", [5] = "VIP_REJECT", [6] = "VIP_INVALID_RELIABILITY_LEVEL", [7] = "VIP_INVALID_MTU",
  [8] = "VIP_INVALID_QOS", [9] = "VIP_INVALID_PTAG", [10] = "VIP_INVALID_RDMAREAD",
  [11] = "VIP_DESCRIPTOR_ERROR", [12] = "VIP_INVALID_STATE", [13] = "VIP_ERROR_NAMESERVICE",
  [14] = "VIP_NO_MATCH",
}
local FRAME_TYPES = {
  [1] = "send", [2] = "RDMA write", [3] = "RDMA read request", [4] = "RDMA read response",
  [5] = "direct send", [6] = "ack",
}
local AM_KINDS = {
  [1] = "request", [2] = "reply", [3] = "store data", [4] = "store done", [5] = "get",
  [7] = "barrier", [8] = "ack", [9] = "bundle",
}
local MESH_KINDS = { [0] = "data", [1] = "credit" }
local MPI_TYPES = {
  [0] = "eager", [1] = "rts", [2] = "fin", [3] = "accumulate", [4] = "rma", [5] = "cancel send",
  [6] = "cancel reply",
}

local EV_FRAME_SENT, EV_FRAME_RECEIVED, EV_DIRECT_WRITE, EV_DIRECT_READ = 1, 2, 3, 4
local EV_CONNECT_FAILED, EV_VI_ERROR = 11, 13
local FRAME_SEND, FRAME_DIRECT_SEND = 1, 5
local FLAG_LAST = 1
local RECORD_HEADER, FRAME_HEADER = 32, 40
local AM_HEADER, AM_ITEM_HEADER, AM_ACK = 16, 8, 8
local AM_REQUEST, AM_REPLY, AM_BUNDLE = 1, 2, 9
local AM_BUNDLE_REPLY, AM_NO_HANDLER = 0xFFFE, 0xFFFF
local AM_MAX_ARGS, AM_MAX_ACKS, AM_MAX_PAYLOAD = 4, 32, 4096
local AM_STORE_DONE, AM_MAX_WHOLE_STORE = 4, 16384  -- a whole store: one store_done without acks (wire.hpp)

local vf = via.fields
vf.version = ProtoField.uint8("viastack.version", "Record version")
vf.event = ProtoField.uint8("viastack.event", "Event", base.DEC, EVENTS)
vf.reliability = ProtoField.uint8("viastack.reliability", "Reliability", base.DEC, RELIABILITY)
vf.nic = ProtoField.uint32("viastack.nic", "NIC")
vf.vi = ProtoField.uint32("viastack.vi", "VI (4294967295: none yet)")
vf.error = ProtoField.uint32("viastack.error", "Error", base.DEC, VIP_ERRORS)
vf.result = ProtoField.uint32("viastack.result", "Result", base.DEC, VIP_RETURNS)
vf.service = ProtoField.string("viastack.service", "Service")
vf.text = ProtoField.string("viastack.text", "Text")
vf.type = ProtoField.uint8("viastack.frame.type", "Frame type", base.DEC, FRAME_TYPES)
vf.flags = ProtoField.uint8("viastack.frame.flags", "Flags", base.HEX)
vf.flag_last = ProtoField.bool("viastack.frame.flags.last", "Last fragment", 8, nil, 0x01)
vf.flag_immediate = ProtoField.bool("viastack.frame.flags.immediate", "Immediate data", 8, nil, 0x02)
vf.flag_error = ProtoField.bool("viastack.frame.flags.error", "Refused", 8, nil, 0x04)
vf.flag_no_data = ProtoField.bool("viastack.frame.flags.no_data", "No data (placed by single copy)", 8, nil, 0x08)
vf.flag_shared = ProtoField.bool("viastack.frame.flags.shared", "Shared (the target may write [offset, total) by single copy)", 8, nil, 0x10)
vf.flag_withdrawable = ProtoField.bool("viastack.frame.flags.withdrawable", "Withdrawable (served through the rings once claimed; imm: the read's number)", 8, nil, 0x20)
vf.message = ProtoField.uint16("viastack.frame.message", "Message number")
vf.length = ProtoField.uint32("viastack.frame.length", "Payload length")
vf.total = ProtoField.uint64("viastack.frame.total", "Message length (acks: count)")
vf.offset = ProtoField.uint64("viastack.frame.offset", "Offset in the message")
vf.raddr = ProtoField.uint64("viastack.frame.raddr", "Remote address", base.HEX)
vf.rhandle = ProtoField.uint32("viastack.frame.rhandle", "Remote memory handle", base.HEX)
vf.imm = ProtoField.uint32("viastack.frame.imm", "Immediate data", base.HEX)
vf.payload = ProtoField.bytes("viastack.frame.payload", "Payload")
vf.direct_address = ProtoField.uint64("viastack.direct.address", "Remote address", base.HEX)
vf.direct_length = ProtoField.uint64("viastack.direct.length", "Length")
vf.direct_handle = ProtoField.uint32("viastack.direct.handle", "Remote memory handle", base.HEX)

local af = am.fields
af.kind = ProtoField.uint8("viastack_am.kind", "Kind", base.DEC, AM_KINDS)
af.nargs = ProtoField.uint8("viastack_am.nargs", "Arguments")
af.status = ProtoField.uint8("viastack_am.status", "Status")
af.acks = ProtoField.uint8("viastack_am.acks", "Acknowledgements")
af.handler = ProtoField.uint16("viastack_am.handler", "Handler (65534: bundle reply, 65535: none)")
af.slot = ProtoField.uint16("viastack_am.slot", "Request slot")
af.seq = ProtoField.uint32("viastack_am.seq", "Sequence number")
af.payload_bytes = ProtoField.uint32("viastack_am.payload_bytes", "Payload bytes")
af.arg = ProtoField.uint64("viastack_am.arg", "Argument", base.HEX)
af.ack_slot = ProtoField.uint16("viastack_am.ack.slot", "Acknowledged slot")
af.ack_seq = ProtoField.uint32("viastack_am.ack.seq", "Acknowledged sequence number")
af.payload = ProtoField.bytes("viastack_am.payload", "Payload")
af.items = ProtoField.uint16("viastack_am.items", "Items in the bundle")
af.item_handler = ProtoField.uint16("viastack_am.item.handler", "Item handler (65535: none)")
af.item_nargs = ProtoField.uint8("viastack_am.item.nargs", "Item arguments")
af.item_status = ProtoField.uint8("viastack_am.item.status", "Item status")
af.item_run = ProtoField.uint16("viastack_am.item.run", "More requests in this run")
af.item_answers = ProtoField.uint16("viastack_am.item.answers", "Answers the bundle's request")
af.item_payload_bytes = ProtoField.uint16("viastack_am.item.payload_bytes", "Item payload bytes")
af.item_arg = ProtoField.uint64("viastack_am.item.arg", "Item argument", base.HEX)
af.item_payload = ProtoField.bytes("viastack_am.item.payload", "Item payload")

local mf = mpi.fields
mf.credits = ProtoField.uint16("viastack_mpi.credits", "Credits returned")
mf.mesh_kind = ProtoField.uint8("viastack_mpi.mesh_kind", "Mesh message", base.DEC, MESH_KINDS)
mf.type = ProtoField.uint8("viastack_mpi.type", "Type", base.DEC, MPI_TYPES)
mf.context = ProtoField.uint32("viastack_mpi.context", "Context")
mf.source = ProtoField.int32("viastack_mpi.source", "Source")
mf.tag = ProtoField.int32("viastack_mpi.tag", "Tag")
mf.size = ProtoField.uint64("viastack_mpi.size", "Message bytes")
mf.token = ProtoField.uint64("viastack_mpi.token", "Token", base.HEX)
mf.address = ProtoField.uint64("viastack_mpi.address", "Address", base.HEX)
mf.handle = ProtoField.uint32("viastack_mpi.handle", "Memory handle", base.HEX)
mf.data = ProtoField.bytes("viastack_mpi.data", "Data")

local bad_length = ProtoExpert.new("viastack.bad_length", "Lengths do not add up", expert.group.MALFORMED,
  expert.severity.ERROR)
via.experts = { bad_length }

-- ---- Active Messages ----

-- The items of a bundle's payload; requests may be runs (one header, then
-- `run` more requests' words). Returns the requests or replies counted.
local function dissect_items(tvb, tree, replies)
  local at, items = 0, 0
  while at < tvb:len() do
    if tvb:len() - at < AM_ITEM_HEADER then
      tree:add_proto_expert_info(bad_length, "an item header is cut short")
      return items
    end
    local handler = tvb(at, 2):le_uint()
    local nargs = tvb(at + 2, 1):le_uint()
    local index = tvb(at + 4, 2):le_uint()
    local payload_bytes = tvb(at + 6, 2):le_uint()
    local run = (not replies) and index or 0
    local padded = math.floor((payload_bytes + 7) / 8) * 8
    local length = AM_ITEM_HEADER + (run + 1) * nargs * 8 + padded
    if nargs > AM_MAX_ARGS or at + length > tvb:len() then
      tree:add_proto_expert_info(bad_length, "an item runs past the bundle")
      return items
    end
    for r = 0, run do
      local words = at + AM_ITEM_HEADER + r * nargs * 8
      local item = tree:add(am, tvb(r == 0 and at or words, r == 0 and AM_ITEM_HEADER + nargs * 8 + padded or nargs * 8),
        string.format("%s for handler %d", replies and "Reply" or "Request", handler))
      item:add_le(af.item_handler, tvb(at, 2))
      item:add_le(af.item_nargs, tvb(at + 2, 1))
      item:add_le(af.item_status, tvb(at + 3, 1))
      if r == 0 then
        item:add_le(replies and af.item_answers or af.item_run, tvb(at + 4, 2))
        item:add_le(af.item_payload_bytes, tvb(at + 6, 2))
      end
      for i = 0, nargs - 1 do item:add_le(af.item_arg, tvb(words + i * 8, 8)) end
      if r == 0 and payload_bytes > 0 then
        item:add(af.item_payload, tvb(at + AM_ITEM_HEADER + nargs * 8, payload_bytes))
      end
      items = items + 1
    end
    at = at + length
  end
  return items
end

local function dissect_am(tvb, pinfo, tree)
  if tvb:len() < AM_HEADER then
    tree:add_proto_expert_info(bad_length, "shorter than an AM header")
    return
  end
  local kind = tvb(0, 1):le_uint()
  local nargs = tvb(1, 1):le_uint()
  local acks = tvb(3, 1):le_uint()
  local handler = tvb(4, 2):le_uint()
  local payload_bytes = tvb(12, 4):le_uint()
  local args_end = AM_HEADER + nargs * 8
  local acks_end = args_end + acks * AM_ACK
  local t = tree:add(am, tvb(), string.format("Active Message: %s, handler %d", AM_KINDS[kind] or "?", handler))
  t:add_le(af.kind, tvb(0, 1))
  t:add_le(af.nargs, tvb(1, 1))
  t:add_le(af.status, tvb(2, 1))
  t:add_le(af.acks, tvb(3, 1))
  t:add_le(af.handler, tvb(4, 2))
  t:add_le(af.slot, tvb(6, 2))
  t:add_le(af.seq, tvb(8, 4))
  t:add_le(af.payload_bytes, tvb(12, 4))
  local max_payload = (kind == AM_STORE_DONE and acks == 0) and AM_MAX_WHOLE_STORE or AM_MAX_PAYLOAD
  if nargs > AM_MAX_ARGS or acks > AM_MAX_ACKS or payload_bytes > max_payload or
      acks_end + payload_bytes ~= tvb:len() then
    t:add_proto_expert_info(bad_length)
    return
  end
  for i = 0, nargs - 1 do t:add_le(af.arg, tvb(AM_HEADER + i * 8, 8)) end
  for i = 0, acks - 1 do
    local ack = t:add(am, tvb(args_end + i * AM_ACK, AM_ACK), "Acknowledgement")
    ack:add_le(af.ack_slot, tvb(args_end + i * AM_ACK, 2))
    ack:add_le(af.ack_seq, tvb(args_end + i * AM_ACK + 4, 4))
  end
  local info = "AM " .. (AM_KINDS[kind] or "?")
  if payload_bytes > 0 then
    local payload = tvb(acks_end, payload_bytes):tvb()
    if kind == AM_BUNDLE or (kind == AM_REPLY and handler == AM_BUNDLE_REPLY) then
      local items = t:add(am, payload(), "Bundle")
      local n = dissect_items(payload, items, kind == AM_REPLY)
      items:add(af.items, n):set_generated()
      info = string.format("AM bundle of %d %s", n, kind == AM_REPLY and "replies" or "requests")
    else
      t:add(af.payload, payload())
    end
  end
  if kind ~= AM_BUNDLE and handler ~= AM_BUNDLE_REPLY then info = info .. " handler " .. handler end
  pinfo.cols.info:append(" " .. info)
end

-- ---- MPI (through the mesh's credit header) ----

local function dissect_mpi(tvb, pinfo, tree)
  if tvb:len() < 8 then return end
  local t = tree:add(mpi, tvb(), "MPI message")
  t:add_le(mf.credits, tvb(0, 2))
  t:add_le(mf.mesh_kind, tvb(2, 1))
  -- An eager message (type 0) has a 16-byte header, its size the data's;
  -- every other type the 48-byte one.
  local eager = tvb:len() >= 9 and tvb(8, 1):le_uint() == 0
  local header_bytes = eager and 16 or 48
  if tvb(2, 1):le_uint() ~= 0 or tvb:len() < 8 + header_bytes then
    pinfo.cols.info:append(" mesh credits")
    return
  end
  local h = tvb(8):tvb()
  t:add_le(mf.type, h(0, 1))
  t:add_le(mf.context, h(4, 4))
  t:add_le(mf.source, h(8, 4))
  t:add_le(mf.tag, h(12, 4))
  if eager then
    t:add(mf.size, h(0, 16), UInt64(h:len() - 16)):set_generated()
  else
    t:add_le(mf.size, h(16, 8))
    t:add_le(mf.token, h(24, 8))
    t:add_le(mf.address, h(32, 8))
    t:add_le(mf.handle, h(40, 4))
  end
  if h:len() > header_bytes then t:add(mf.data, h(header_bytes)) end
  pinfo.cols.info:append(string.format(" MPI %s tag %d", MPI_TYPES[h(0, 1):le_uint()] or "?", h(12, 4):le_int()))
end

-- ---- the trace record ----

local ip_dissector = Dissector.get("ip")

function via.dissector(tvb, pinfo, tree)
  if tvb:len() < RECORD_HEADER then return 0 end
  pinfo.cols.protocol = "viastack"
  local event = tvb(1, 1):le_uint()
  local service_bytes = tvb(3, 1):le_uint()
  local service = service_bytes > 0 and tvb(16, service_bytes):string() or ""
  local t = tree:add(via, tvb(), "viastack " .. (EVENTS[event] or "event " .. event))
  t:add_le(vf.version, tvb(0, 1))
  t:add_le(vf.event, tvb(1, 1))
  t:add_le(vf.reliability, tvb(2, 1))
  t:add_le(vf.nic, tvb(4, 4))
  t:add_le(vf.vi, tvb(8, 4))
  if event == EV_VI_ERROR then t:add_le(vf.error, tvb(12, 4)) end
  if event == EV_CONNECT_FAILED then t:add_le(vf.result, tvb(12, 4)) end
  if service_bytes > 0 then t:add(vf.service, tvb(16, service_bytes)) end
  local vi = tvb(8, 4):le_uint()
  local where = string.format("NIC %d", tvb(4, 4):le_uint()) .. (vi == 0xFFFFFFFF and "" or " VI " .. vi)
  pinfo.cols.info = string.format("%s %s", where, EVENTS[event] or "?")
  local body = tvb(RECORD_HEADER):tvb()

  if event == EV_FRAME_SENT or event == EV_FRAME_RECEIVED then
    if body:len() < FRAME_HEADER then
      t:add_proto_expert_info(bad_length, "shorter than a frame header")
      return tvb:len()
    end
    local type = body(0, 1):le_uint()
    local flags = body(1, 1):le_uint()
    local length = body(4, 4):le_uint()
    local f = t:add(via, body(0, FRAME_HEADER), "Frame header")
    f:add_le(vf.type, body(0, 1))
    local fl = f:add_le(vf.flags, body(1, 1))
    fl:add_le(vf.flag_last, body(1, 1))
    fl:add_le(vf.flag_immediate, body(1, 1))
    fl:add_le(vf.flag_error, body(1, 1))
    fl:add_le(vf.flag_no_data, body(1, 1))
    fl:add_le(vf.flag_shared, body(1, 1))
    fl:add_le(vf.flag_withdrawable, body(1, 1))
    f:add_le(vf.message, body(2, 2))
    f:add_le(vf.length, body(4, 4))
    f:add_le(vf.total, body(8, 8))
    f:add_le(vf.offset, body(16, 8))
    f:add_le(vf.raddr, body(24, 8))
    f:add_le(vf.rhandle, body(32, 4))
    f:add_le(vf.imm, body(36, 4))
    pinfo.cols.info:append(string.format(" %s %d B", FRAME_TYPES[type] or "?", length))
    local captured = body:len() - FRAME_HEADER
    if length == 0 then return tvb:len() end
    local payload = body(FRAME_HEADER, math.min(length, captured)):tvb()
    t:add(vf.payload, payload())
    -- A whole message in one frame, all of it captured: what the layer above sent.
    local whole = type == FRAME_SEND and body(16, 8):le_uint64():tonumber() == 0 and
        bit.band(flags, FLAG_LAST) ~= 0 and captured >= length
    if whole then
      if service == "am" then
        dissect_am(payload, pinfo, tree)
      elseif service == "mpi" then
        dissect_mpi(payload, pinfo, tree)
      elseif service == "utcp" and ip_dissector then
        ip_dissector:call(payload, pinfo, tree)
      end
    end
  elseif event == EV_DIRECT_WRITE or event == EV_DIRECT_READ then
    if body:len() >= 24 then
      t:add_le(vf.direct_address, body(0, 8))
      t:add_le(vf.direct_length, body(8, 8))
      t:add_le(vf.direct_handle, body(16, 4))
      pinfo.cols.info:append(string.format(" %d B", body(8, 8):le_uint64():tonumber()))
    end
  elseif body:len() > 0 then
    t:add(vf.text, body())
    pinfo.cols.info:append(": " .. body():string())
  end
  return tvb:len()
end

DissectorTable.get("wtap_encap"):add(wtap.USER0, via)
