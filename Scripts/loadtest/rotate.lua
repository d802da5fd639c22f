-- wrk script for Scripts/loadtest.sh.
--   wrk ... -s rotate.lua http://127.0.0.1:PORT -- URLFILE THREADS
-- Each request takes the next path from URLFILE (one path per line, e.g. /images/jpeg/x.jpg?w=256),
-- going round the list; thread k of n starts k/n of the way into the list, so the threads do not
-- ask for the same path at the same moment. response() counts answers that are not 2xx/3xx and
-- the X-Strata-Tier header values; done() prints one line:
--   LOADTEST_RESULT {"requests":…,"rps":…,"p99_ms":…,"errors":…,…}

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_index", #threads - 1)
end

local requests = {}
local next_request = 1
bad = 0
tiers = {}

function init(args)
  local file = assert(io.open(args[1], "r"), "cannot open the URL list " .. tostring(args[1]))
  for line in file:lines() do
    if line ~= "" then
      requests[#requests + 1] = wrk.format("GET", line)
    end
  end
  file:close()
  assert(#requests > 0, "the URL list is empty")
  local thread_count = tonumber(args[2] or "1")
  next_request = math.floor(thread_index * #requests / thread_count) % #requests + 1
end

function request()
  local r = requests[next_request]
  next_request = next_request % #requests + 1
  return r
end

function response(status, headers, body)
  if status < 200 or status > 399 then
    bad = bad + 1
  end
  local tier = headers["X-Strata-Tier"] or headers["x-strata-tier"]
  if tier then
    tiers[tier] = (tiers[tier] or 0) + 1
  end
end

function done(summary, latency, _)
  local non2xx = 0
  local tier_totals = {}
  for _, thread in ipairs(threads) do
    non2xx = non2xx + (tonumber(thread:get("bad")) or 0)
    local t = thread:get("tiers")
    if type(t) == "table" then
      for name, count in pairs(t) do
        tier_totals[name] = (tier_totals[name] or 0) + count
      end
    end
  end
  local e = summary.errors
  local socket_errors = e.connect + e.read + e.write + e.timeout
  local seconds = summary.duration / 1e6
  local tier_parts = {}
  for name, count in pairs(tier_totals) do
    tier_parts[#tier_parts + 1] = string.format("%q:%d", name, count)
  end
  io.write(string.format(
    'LOADTEST_RESULT {"requests":%d,"seconds":%.3f,"rps":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,'
      .. '"non2xx":%d,"socket_errors":%d,"timeouts":%d,"errors":%d,"tiers":{%s}}\n',
    summary.requests, seconds, summary.requests / seconds,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    non2xx, socket_errors, e.timeout, non2xx + socket_errors, table.concat(tier_parts, ",")))
end
