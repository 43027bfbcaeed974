-- Recursion (fib, Ackermann, N-queens, binary trees) and array-heavy table work:
-- table.insert/remove/concat/move/unpack, table.sort with and without comparators, a merge sort.
math.randomseed(42)

local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end

local function ack(m, n)
  if m == 0 then return n + 1 end
  if n == 0 then return ack(m - 1, 1) end
  return ack(m - 1, ack(m, n - 1))
end

local function queens(n)
  local cols, d1, d2, count = {}, {}, {}, 0
  local function place(r)
    if r > n then count = count + 1 return end
    for c = 1, n do
      if not cols[c] and not d1[r + c] and not d2[r - c + n] then
        cols[c], d1[r + c], d2[r - c + n] = true, true, true
        place(r + 1)
        cols[c], d1[r + c], d2[r - c + n] = false, false, false
      end
    end
  end
  place(1)
  return count
end

local function make_tree(depth)
  if depth == 0 then return { left = false, right = false } end
  depth = depth - 1
  return { left = make_tree(depth), right = make_tree(depth) }
end

local function check_tree(t)
  if not t.left then return 1 end
  return 1 + check_tree(t.left) + check_tree(t.right)
end

local function merge_sort(a, lo, hi, tmp)
  if hi - lo < 1 then return end
  local mid = (lo + hi) // 2
  merge_sort(a, lo, mid, tmp)
  merge_sort(a, mid + 1, hi, tmp)
  local i, j, k = lo, mid + 1, lo
  while i <= mid and j <= hi do
    if a[i] <= a[j] then tmp[k] = a[i]; i = i + 1 else tmp[k] = a[j]; j = j + 1 end
    k = k + 1
  end
  while i <= mid do tmp[k] = a[i]; i = i + 1; k = k + 1 end
  while j <= hi do tmp[k] = a[j]; j = j + 1; k = k + 1 end
  table.move(tmp, lo, hi, lo, a)
end

print("fib", fib(21), "ack", ack(2, 9), "queens", queens(7))

local nodes = 0
for d = 4, 8, 2 do
  local iters = 1 << (9 - d)
  local sum = 0
  for _ = 1, iters do sum = sum + check_tree(make_tree(d)) end
  nodes = nodes + sum
end
print("tree nodes", nodes)

-- sorting: numbers, strings, records with a multi-key comparator (keys are distinct: table.sort
-- switches to a clock-seeded pivot when it sees unbalanced partitions, so sorted data must not cause any)
local nums, seen = {}, {}
while #nums < 1000 do
  local v = math.random(1, 100000)
  if not seen[v] then seen[v] = true; nums[#nums + 1] = v end
end
local copy = { table.unpack(nums, 1, 200) }
local desc = table.move(nums, 1, #nums, 1, {})
table.sort(nums)
table.sort(desc, function(a, b) return a > b end)
merge_sort(copy, 1, #copy, {})
print("sorted", nums[1], nums[500], nums[1000], desc[1], copy[1], copy[200])

local words = {}
for i = 1, 800 do
  local h = i * 7919 % 17576
  words[i] = string.char(97 + h % 26, 97 + h // 26 % 26, 97 + h // 676) .. (i % 10)
end
table.sort(words)
print("words", words[1], words[400], words[800])

local recs = {}
for i = 1, 800 do
  recs[i] = { dept = math.random(1, 6), age = math.random(20, 65), id = i }
end
table.sort(recs, function(a, b)
  if a.dept ~= b.dept then return a.dept < b.dept end
  if a.age ~= b.age then return a.age > b.age end
  return a.id < b.id
end)
print("recs", recs[1].dept, recs[1].age, recs[1].id, recs[800].dept, recs[800].age, recs[800].id)

-- queue/stack churn with table.insert/remove
local q, popped = {}, 0
for i = 1, 1500 do
  table.insert(q, i)
  if #q > 32 then popped = popped + table.remove(q, 1) end
  if i % 5 == 0 then popped = popped + table.remove(q) end
  if i % 7 == 0 then table.insert(q, 1, -i) end
end
print("queue", #q, popped, table.concat(q, ",", 1, 5))

-- Pascal's triangle rows and a memoised partition count
local row = { 1 }
for _ = 1, 60 do
  local nxt = { 1 }
  for i = 2, #row do nxt[i] = row[i - 1] + row[i] end
  nxt[#row + 1] = 1
  row = nxt
end
local memo = {}
local function partitions(n, k)
  if n == 0 then return 1 end
  if n < 0 or k == 0 then return 0 end
  local key = n * 1000 + k
  local v = memo[key]
  if v then return v end
  v = partitions(n - k, k) + partitions(n, k - 1)
  memo[key] = v
  return v
end
print("pascal", row[31], "partitions", partitions(90, 90))
