-- wrk script: one fixed JSON-RPC request, over and over (GetTask, ListTasks, …).
--
--   BODY='{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"…"}}' \
--     wrk -t1 -c16 -d10s --latency -s rpc.lua http://127.0.0.1:3097
--
-- env PATH_RPC  JSON-RPC endpoint path (default "/")
-- env BODY      the request body (required)
-- A response counts as an error when the HTTP status is not 200 or the body has an "error"
-- member; the counts print in done(), in the shape of the shared load scripts.

local path = os.getenv("PATH_RPC") or "/"
local body = os.getenv("BODY") or error("set BODY to the JSON-RPC request")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  responses, non200, rpc_errors = 0, 0, 0
  request_text = wrk.format("POST", path, {
    ["Content-Type"] = "application/json",
    ["A2A-Version"] = "1.0",
  }, body)
end

function request()
  return request_text
end

function response(status, hdrs, text)
  responses = responses + 1
  if status ~= 200 then
    non200 = non200 + 1
  elseif text == nil or string.find(text, '"error":', 1, true) then
    rpc_errors = rpc_errors + 1
  end
end

function done(summary, latency, requests)
  local got, bad_status, bad_rpc = 0, 0, 0
  for _, t in ipairs(threads) do
    got = got + (t:get("responses") or 0)
    bad_status = bad_status + (t:get("non200") or 0)
    bad_rpc = bad_rpc + (t:get("rpc_errors") or 0)
  end
  io.write(string.format("a2a: responses_checked=%d non_200=%d jsonrpc_errors=%d\n",
    got, bad_status, bad_rpc))
end
