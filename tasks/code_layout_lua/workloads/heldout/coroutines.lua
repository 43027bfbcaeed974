-- Coroutines: generators via coroutine.wrap, producer/filter/consumer pipelines, a prime sieve of
-- chained coroutines, a round-robin scheduler, status/isyieldable/close, and errors crossing resume/pcall.
local co = coroutine

local function gen_range(n)
  return co.wrap(function() for i = 1, n do co.yield(i) end end)
end
local function filter(pred, src)
  return co.wrap(function()
    for v in src do if pred(v) then co.yield(v) end end
  end)
end
local function map(fn, src)
  return co.wrap(function()
    for v in src do co.yield(fn(v)) end
  end)
end

local s, n = 0, 0
for v in map(function(x) return x * x end, filter(function(x) return x % 3 ~= 0 end, gen_range(6000))) do
  s = s + v; n = n + 1
end
print("pipeline", n, s)

-- prime sieve: each prime gets its own filtering coroutine
local function sieve(limit)
  local src = gen_range(limit)
  src()
  local primes = {}
  while true do
    local p = src()
    if not p then break end
    primes[#primes + 1] = p
    local prev = src
    src = co.wrap(function()
      for v in prev do if v % p ~= 0 then co.yield(v) end end
    end)
  end
  return primes
end
local primes = sieve(400)
print("primes", #primes, primes[#primes], table.concat(primes, ",", 1, 10))

-- permutations generator (recursive yields through nested calls)
local function permgen(a, k)
  k = k or #a
  if k <= 1 then co.yield(a) return end
  for i = 1, k do
    a[k], a[i] = a[i], a[k]
    permgen(a, k - 1)
    a[k], a[i] = a[i], a[k]
  end
end
local count, sig = 0, 0
for p in co.wrap(function() permgen({ 1, 2, 3, 4, 5, 6, 7 }) end) do
  count = count + 1
  sig = (sig * 31 + p[1] * 7 + p[7]) % 1000003
end
print("perms", count, sig)

-- round-robin scheduler with message passing between tasks
local tasks, mailbox, log = {}, {}, {}
local function spawn(name, fn) tasks[#tasks + 1] = { name = name, co = co.create(fn) } end
local function send(to, msg) local q = mailbox[to] or {}; mailbox[to] = q; q[#q + 1] = msg end
local function recv(me)
  while true do
    local q = mailbox[me]
    if q and #q > 0 then return table.remove(q, 1) end
    co.yield("wait")
  end
end
spawn("ping", function()
  for i = 1, 300 do send("pong", i); local r = recv("ping"); if r ~= i + 1 then error("bad reply") end end
  send("pong", "stop")
  return "ping done"
end)
spawn("pong", function()
  local seen = 0
  while true do
    local m = recv("pong")
    if m == "stop" then return "pong done " .. seen end
    seen = seen + 1
    send("ping", m + 1)
  end
end)
spawn("ticker", function()
  for i = 1, 150 do co.yield(i) end
  return "ticker done"
end)
local steps = 0
while #tasks > 0 do
  for i = #tasks, 1, -1 do
    local t = tasks[i]
    local ok, r = co.resume(t.co)
    steps = steps + 1
    if not ok then log[#log + 1] = t.name .. " failed: " .. r; table.remove(tasks, i)
    elseif co.status(t.co) == "dead" then log[#log + 1] = r; table.remove(tasks, i) end
  end
end
table.sort(log)
print("scheduler", steps, table.concat(log, "; "))

-- errors inside coroutines, pcall across yields, close with pending to-be-closed variables
local caught = 0
for i = 1, 400 do
  local c = co.create(function(x)
    local y = co.yield(x + 1)
    if y % 5 == 0 then error({ code = y }) end
    local ok = pcall(function() co.yield(y * 2); if y % 7 == 0 then error("inner") end end)
    return ok and y or -y
  end)
  local _, a = co.resume(c, i)
  local ok, b = co.resume(c, a)
  if not ok then caught = caught + b.code
  else
    local _, d = co.resume(c)
    caught = caught + d + (b and 0 or 1)
  end
end
local closed = 0
for i = 1, 200 do
  local c = co.create(function()
    local _ <close> = setmetatable({}, { __close = function() closed = closed + 1 end })
    co.yield(i)
  end)
  co.resume(c)
  co.close(c)
end
print("errors", caught, closed, co.isyieldable(), co.status(co.create(print)))

-- a tokenizer coroutine feeding a parser that sums nested lists
local src = string.rep("[1, 2, [3, 4, [5]], 6] ", 60)
local lex = co.wrap(function()
  for tok in src:gmatch("%d+") do co.yield("num", tonumber(tok)) end
  co.yield("eof")
end)
local depth_sum = 0
local lex2 = co.wrap(function()
  local depth = 0
  for ch in src:gmatch("[%[%]]") do
    depth = depth + (ch == "[" and 1 or -1)
    co.yield(depth)
  end
end)
for d in lex2 do depth_sum = depth_sum + d end
local total = 0
while true do
  local kind, v = lex()
  if kind == "eof" then break end
  total = total + v
end
print("lexer", total, depth_sum)
