-- wrk script for tests/bench/bench_http.sh: random records from a list.
--   wrk ... -s bench_http.lua URL -- state FILE     GET /pith/{BODY}/state.json
--   wrk ... -s bench_http.lua URL -- resolve FILE   GET /api/pith-number/resolve?arxiv=ID&json=true
-- FILE holds one record body (state) or arXiv id (resolve) per line. Every
-- wrk thread loads the list and draws from it with its own seed.
local ids = {}
local counter = 0
mode = "state" -- a global: done() reads it from a thread (thread:get)
local threads = {}

function setup(thread)
	threads[#threads + 1] = thread
end

function init(args)
	mode = args[1] or "state"
	for line in io.lines(args[2]) do
		ids[#ids + 1] = line
	end
	counter = counter + 1
	math.randomseed(os.time() * 1000 + counter + math.floor(os.clock() * 1e6))
end

function request()
	local id = ids[math.random(#ids)]
	if mode == "resolve" then
		return wrk.format("GET", "/api/pith-number/resolve?arxiv=" .. id .. "&json=true")
	end
	return wrk.format("GET", "/pith/" .. id .. "/state.json")
end

function done(summary, latency, requests)
	-- done() runs in the main script, where init() never ran
	local mode = threads[1] and threads[1]:get("mode") or mode
	io.write(string.format("RESULT mode=%s requests=%d duration_s=%.2f rps=%.0f " ..
		"p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f errors=%d non2xx=%d\n",
		mode, summary.requests, summary.duration / 1e6,
		summary.requests / (summary.duration / 1e6),
		latency:percentile(50) / 1000, latency:percentile(90) / 1000,
		latency:percentile(99) / 1000, latency.max / 1000,
		summary.errors.connect + summary.errors.read + summary.errors.write +
		summary.errors.timeout, summary.errors.status))
end
