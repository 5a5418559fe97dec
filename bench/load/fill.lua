-- wrk script: SendMessage with unique message ids until COUNT answers came back (per wrk thread),
-- to fill a store before measuring reads over it.
--
--   COUNT=100000 wrk -t1 -c16 -d600s -s fill.lua http://127.0.0.1:3097
--
-- env PATH_RPC  JSON-RPC endpoint path (default "/")
-- env COUNT     answers to wait for (default 100000)

local path = os.getenv("PATH_RPC") or "/"
local count = tonumber(os.getenv("COUNT") or "100000")

function init(args)
  sent, answered = 0, 0
  prefix = string.format("fill-%d-%d-", os.time(), math.random(1, 1000000000))
  headers = { ["Content-Type"] = "application/json", ["A2A-Version"] = "1.0" }
end

function request()
  sent = sent + 1
  return wrk.format("POST", path, headers,
    '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"' ..
    prefix .. sent .. '","role":"ROLE_USER","parts":[{"text":"fill"}]},' ..
    '"configuration":{"historyLength":0}}}')
end

function response(status, hdrs, text)
  answered = answered + 1
  if answered >= count then
    wrk.thread:stop()
  end
end
