-- wrk script for Scripts/bench-iiif.sh: each thread walks the tile paths of the file named by
-- the first script argument round-robin (threads start at different offsets), counts the
-- responses that are not 2xx, and done() prints one BENCH line for the shell script to parse.
local threads = {}
local started = 0

function setup(thread)
  started = started + 1
  thread:set("id", started)
  table.insert(threads, thread)
end

function init(args)
  paths = {}
  for line in io.lines(args[1]) do
    if #line > 0 then
      paths[#paths + 1] = line
    end
  end
  index = ((id or 1) * 97) % #paths
  non2xx = 0
end

function request()
  index = index % #paths + 1
  return wrk.format("GET", paths[index])
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("non2xx")
  end
  local e = summary.errors
  local seconds = summary.duration / 1e6
  io.write(string.format("BENCH requests=%d seconds=%.3f tiles_per_s=%.1f p99_ms=%.2f non2xx=%d socket_errors=%d\n",
    summary.requests, seconds, summary.requests / seconds, latency:percentile(99) / 1000,
    bad, e.connect + e.read + e.write + e.timeout))
end
