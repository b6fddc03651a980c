-- wrk script for tests/bench/bench_site.py --state-only: fetches every
-- record's state.json once, to give nginx the bytes pithd answers.
--   wrk -t T -c C -d LONG -s bench_fetch.lua URL -- FILE OUTPREFIX T
-- FILE holds one record body a line; thread i asks for lines i, i+T, ...
-- and appends each answer to OUTPREFIX.i as "LENGTH\n" then the body.
-- A thread stops once it has as many answers as it has lines, and then
-- writes OUTPREFIX.i.done (wrk itself runs for its -d: the bench stops it
-- once every thread is done). The bench names each body by the pith
-- number inside it, so the order of answers over a thread's connections
-- does not matter.
local threads = {}
local ids, next_i, got, want, out, pre = {}, 1, 0, 0, nil, nil

function setup(thread)
	threads[#threads + 1] = thread
	thread:set("idx", #threads)
end

function init(args)
	local all = {}
	for line in io.lines(args[1]) do
		all[#all + 1] = line
	end
	local k = 0
	for i = idx, #all, tonumber(args[3]) do
		k = k + 1
		ids[k] = all[i]
	end
	want = k
	pre = args[2] .. "." .. idx
	out = io.open(pre, "wb")
end

function request()
	local id = ids[next_i] or ids[#ids]
	next_i = next_i + 1
	return wrk.format("GET", "/pith/" .. id .. "/state.json")
end

function response(status, headers, body)
	if status == 200 and got < want then
		out:write(#body, "\n", body)
	end
	got = got + 1
	if got == want then
		out:close()
		io.open(pre .. ".done", "w"):close()
		wrk.thread:stop()
	end
end
