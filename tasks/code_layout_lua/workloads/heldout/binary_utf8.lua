-- Binary data and integers: string.pack/unpack/packsize records, utf8 (char/codes/len/offset/codepoint),
-- bitwise operators and integer division in CRC-32, Adler-32, base64, xorshift and a bit-packed bitmap.
local function xorshift(seed)
  local x = seed
  return function()
    x = x ~ (x << 13); x = x ~ (x >> 7); x = x ~ (x << 17)
    return x
  end
end
local rng = xorshift(88172645463325252)

-- CRC-32 with a generated table
local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if c & 1 == 1 then c = 0xEDB88320 ~ (c >> 1) else c = c >> 1 end
  end
  crc_table[i] = c
end
local function crc32(s)
  local c = 0xFFFFFFFF
  for i = 1, #s do c = crc_table[(c ~ s:byte(i)) & 0xFF] ~ (c >> 8) end
  return c ~ 0xFFFFFFFF
end
local function adler32(s)
  local a, b = 1, 0
  for i = 1, #s do a = (a + s:byte(i)) % 65521; b = (b + a) % 65521 end
  return (b << 16) | a
end

-- pack a table of records into one binary blob and read it back
local fmt = "<i4 I2 d s1 B z"
local parts = {}
for i = 1, 1000 do
  local r = rng()
  parts[i] = string.pack(fmt, i - 500, r & 0xFFFF, (r % 10007) / 13.0, "n" .. (i % 97), i % 256, "rec" .. i)
end
local blob = table.concat(parts)
local pos, n, isum, fsum, names = 1, 0, 0, 0.0, 0
while pos <= #blob do
  local a, b, c, d, e, f
  a, b, c, d, e, f, pos = string.unpack(fmt, blob, pos)
  n = n + 1; isum = isum + a + b + e; fsum = fsum + c; names = names + #d + #f
end
print("records", n, #blob, isum, string.format("%.4f", fsum), names)
print("checksums", string.format("%08x %08x", crc32(blob:sub(1, 9000)), adler32(blob:sub(-7000))))

local sizes = {}
for _, f in ipairs({ "i1", "i2", "i4", "i8", "j", "n", "d", "f", "<i3 >i5 =i7", "!8 b i8", "I16" }) do
  sizes[#sizes + 1] = string.packsize(f)
end
print("packsize", table.concat(sizes, " "))
local be = string.pack(">I4 >i2 >J", 0xDEADBEEF, -2, 1 << 40)
local le = string.pack("<I4 <i2 <J", 0xDEADBEEF, -2, 1 << 40)
print("endian", (be:gsub(".", function(ch) return string.format("%02x", ch:byte()) end)), select("#", string.unpack("<I4 <i2 <J", le)), string.unpack(">i2", be, 5))

-- base64 encode/decode with bit operations
local b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local b64idx = {}
for i = 1, 64 do b64idx[b64:byte(i)] = i - 1 end
local function enc(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = (a << 16) | ((b or 0) << 8) | (c or 0)
    out[#out + 1] = string.char(b64:byte((v >> 18) + 1), b64:byte(((v >> 12) & 63) + 1),
      b and b64:byte(((v >> 6) & 63) + 1) or 61, c and b64:byte((v & 63) + 1) or 61)
  end
  return table.concat(out)
end
local function dec(s)
  local out = {}
  for i = 1, #s, 4 do
    local a, b, c, d = s:byte(i, i + 3)
    local v = (b64idx[a] << 18) | (b64idx[b] << 12) | ((b64idx[c] or 0) << 6) | (b64idx[d] or 0)
    out[#out + 1] = string.char(v >> 16, (v >> 8) & 255, v & 255):sub(1, (c == 61 and 1) or (d == 61 and 2) or 3)
  end
  return table.concat(out)
end
local chunk = blob:sub(1, 3000)
local e64 = enc(chunk)
print("base64", #e64, e64:sub(1, 32), dec(e64) == chunk, enc("Lua 5.4"), dec(enc("ab")))

-- utf8: build multilingual text, iterate by code point, reverse by characters, validate
local cps = { 0x48, 0x65, 0xE9, 0x3B1, 0x3B2, 0x416, 0x5D0, 0x627, 0x4E2D, 0x6587, 0x1F600, 0x1F30D, 0x20AC, 0x10348 }
local buf = {}
for i = 1, 800 do buf[i] = utf8.char(cps[(i * 5) % #cps + 1], 0x61 + i % 26) end
local u = table.concat(buf, " ")
local ulen = utf8.len(u)
local cpsum, wide = 0, 0
for _, cp in utf8.codes(u) do
  cpsum = cpsum + cp
  if cp > 0xFFFF then wide = wide + 1 end
end
local rev = {}
local idx = 1
while idx <= #u do
  local nxt = utf8.offset(u, 2, idx)
  rev[#rev + 1] = u:sub(idx, nxt - 1)
  idx = nxt
end
local rs = {}
for i = #rev, 1, -1 do rs[#rs + 1] = rev[i] end
local ru = table.concat(rs)
print("utf8", #u, ulen, cpsum, wide, utf8.len(ru), utf8.codepoint(ru, 1), utf8.len("\xff\xfe"), #utf8.charpattern)
local mids = {}
for k = 1, 8 do mids[k] = utf8.codepoint(u, utf8.offset(u, k * 97)) end
print("offsets", table.concat(mids, ","), utf8.char(72, 0x20AC, 0x10348))

-- bit-packed bitmap and popcount over integers
local words = {}
for i = 0, 255 do words[i] = 0 end
for i = 1, 6000 do
  local bit = rng() % 16384
  words[bit >> 6] = words[bit >> 6] | (1 << (bit & 63))
end
local function popcount(x)
  local c = 0
  while x ~= 0 do x = x & (x - 1); c = c + 1 end
  return c
end
local ones, folded = 0, 0
for i = 0, 255 do ones = ones + popcount(words[i]); folded = folded ~ words[i] ~ (words[i] >> 3) end
print("bitmap", ones, string.format("%016x", folded), math.ult(1, -1), 7 // 2, -7 // 2, 7 % -3, math.tointeger(2 ^ 53))
