-- String library: string.format with many specifiers, gsub with string/table/function replacements,
-- gmatch/find/match with captures and anchors, rep/sub/byte/char/upper/lower/reverse, table.concat.
math.randomseed(42)

local syll = { "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "qua", "der", "plin" }
local words = {}
for i = 1, 1600 do
  local n = 1 + math.random(0, 2)
  local parts = {}
  for j = 1, n do parts[j] = syll[math.random(#syll)] end
  words[i] = table.concat(parts)
end
local text = {}
for i = 1, #words, 10 do
  local line = table.concat(words, " ", i, math.min(i + 9, #words))
  text[#text + 1] = line:sub(1, 1):upper() .. line:sub(2) .. (i % 30 == 1 and "!" or ".")
end
local doc = table.concat(text, "\n")
print("doc", #doc, #text)

-- word frequencies, reported in sorted order
local freq = {}
for w in doc:gmatch("%a+") do
  w = w:lower()
  freq[w] = (freq[w] or 0) + 1
end
local keys = {}
for k in pairs(freq) do keys[#keys + 1] = k end
table.sort(keys, function(a, b) if freq[a] ~= freq[b] then return freq[a] > freq[b] end return a < b end)
local top = {}
for i = 1, 6 do top[i] = string.format("%s=%d", keys[i], freq[keys[i]]) end
print("distinct", #keys, table.concat(top, " "))

-- gsub with strings, tables, functions, anchors and %b / %f patterns
local vowels = { a = "4", e = "3", i = "1", o = "0" }
local leet, nv = doc:gsub("[aeio]", vowels)
local caps, nc = doc:gsub("%f[%a]%a", string.upper)
local swapped = doc:gsub("(%a+) (%a+)", "%2 %1")
local _, nsent = doc:gsub("[%.!]\n?", "")
print("gsub", nv, nc, #swapped, nsent, leet:sub(1, 24), caps:sub(1, 24))

local tmpl = "Dear ${name}, your order #${id} of ${qty} x ${item} ships on day ${day}."
local total = 0
for i = 1, 300 do
  local vars = { name = words[i], id = tostring(1000 + i), qty = tostring(i % 9 + 1), item = words[i + 7], day = tostring(i % 31) }
  local s = tmpl:gsub("%${(%w+)}", vars)
  total = total + #s
end
print("templates", total)

local nested = string.rep("(a(b)c)", 50) .. "[x[y]z]" .. string.rep("{1{2}3}", 40)
local nb = 0
for _ in nested:gmatch("%b()") do nb = nb + 1 end
print("balanced", nb, nested:match("%b[]"), select(2, nested:gsub("%b{}", "")))

-- parse key=value records and CSV-ish lines with captures
local recs = {}
for i = 1, 400 do
  recs[i] = string.format("id=%04d; name=%s; score=%.2f; tags=[%s,%s]", i, words[i], (i * 37 % 1000) / 7, words[i + 1], words[i + 2])
end
local sum, maxname = 0, ""
for _, r in ipairs(recs) do
  local id, name, score, t1, t2 = r:match("^id=(%d+); name=(%w+); score=([%d%.]+); tags=%[(%w+),(%w+)%]$")
  sum = sum + tonumber(id) + tonumber(score) + #t1 + #t2
  if name > maxname then maxname = name end
end
print("records", string.format("%.2f", sum), maxname)

local csv = {}
for i = 1, 200 do csv[i] = table.concat({ i, words[i], i * 3 % 17, '"' .. words[i + 3] .. ' ' .. words[i + 4] .. '"' }, ",") end
local fields = 0
for _, line in ipairs(csv) do
  local pos = 1
  while pos <= #line do
    local s, e
    if line:sub(pos, pos) == '"' then s, e = line:find('^"[^"]*"', pos) else s, e = line:find("^[^,]*", pos) end
    fields = fields + 1
    pos = e + 2
  end
end
print("csv fields", fields)

-- formatting: many specifiers, padding, %q, %a-free numeric output
local out = {}
for i = 1, 200 do
  out[#out + 1] = string.format("%5d|%-8s|%08.3f|%x|%X|%o|%e|%g|%c|%q|%5.1s|%%", i, words[i], i / 7, i * 255, i * 4099, i, i * 1.5e3, i / 3, 65 + i % 26, words[i] .. "\n", words[i])
end
local blob = table.concat(out, "\n")
print("format", #blob, out[1], out[200])

-- byte/char/reverse/rep/find plain
local bsum = 0
for i = 1, #doc, 7 do bsum = bsum + doc:byte(i) end
local rev = doc:sub(1, 2000):reverse()
local chars = {}
for i = 1, 200 do chars[i] = string.char(32 + (i * 7) % 95) end
local found = 0
local init = 1
while true do
  local s = doc:find("ka", init, true)
  if not s then break end
  found = found + 1
  init = s + 1
end
print("bytes", bsum, rev:sub(1, 16), #table.concat(chars), found, ("ab"):rep(5, "-"))
