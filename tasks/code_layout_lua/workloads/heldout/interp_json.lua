-- A JSON encoder/decoder (recursive descent, string escapes, sorted-key objects), a tokenizer +
-- Pratt parser + tree-walking interpreter for a tiny language, and load() compiling generated Lua chunks.

-- JSON -----------------------------------------------------------------------
local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
local function encode(v, out)
  local t = type(v)
  if t == "nil" then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then
    out[#out + 1] = math.type(v) == "integer" and tostring(v) or string.format("%.14g", v)
  elseif t == "string" then
    out[#out + 1] = '"' .. v:gsub('[%c"\\]', function(c) return escapes[c] or string.format("\\u%04x", c:byte()) end) .. '"'
  elseif #v > 0 or next(v) == nil then
    out[#out + 1] = "["
    for i, x in ipairs(v) do
      if i > 1 then out[#out + 1] = "," end
      encode(x, out)
    end
    out[#out + 1] = "]"
  else
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      encode(k, out); out[#out + 1] = ":"; encode(v[k], out)
    end
    out[#out + 1] = "}"
  end
  return out
end
local function to_json(v) return table.concat(encode(v, {})) end

local function decode(s)
  local pos = 1
  local value
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local function str()
    local buf = {}
    pos = pos + 1
    while true do
      local c = s:sub(pos, pos)
      if c == '"' then pos = pos + 1 break end
      if c == "\\" then
        local e = s:sub(pos + 1, pos + 1)
        if e == "u" then buf[#buf + 1] = utf8.char(tonumber(s:sub(pos + 2, pos + 5), 16)); pos = pos + 6
        else buf[#buf + 1] = ({ n = "\n", t = "\t", r = "\r", b = "\b", f = "\f" })[e] or e; pos = pos + 2 end
      else
        local stop = s:find('["\\]', pos)
        buf[#buf + 1] = s:sub(pos, stop - 1); pos = stop
      end
    end
    return table.concat(buf)
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      local obj = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "}" then pos = pos + 1 return obj end
      repeat
        ws(); local k = str(); ws()
        assert(s:sub(pos, pos) == ":"); pos = pos + 1
        obj[k] = value(); ws()
        local d = s:sub(pos, pos); pos = pos + 1
      until d == "}"
      return obj
    elseif c == "[" then
      local arr = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "]" then pos = pos + 1 return arr end
      repeat
        arr[#arr + 1] = value(); ws()
        local d = s:sub(pos, pos); pos = pos + 1
      until d == "]"
      return arr
    elseif c == '"' then return str()
    elseif s:find("^true", pos) then pos = pos + 4 return true
    elseif s:find("^false", pos) then pos = pos + 5 return false
    elseif s:find("^null", pos) then pos = pos + 4 return nil
    else
      local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      pos = pos + #num
      return math.tointeger(tonumber(num)) or tonumber(num)
    end
  end
  return value()
end

local catalog = {}
for i = 1, 50 do
  catalog[i] = {
    id = i, name = "item \"" .. i .. "\"\t#" .. (i * 7 % 13), price = (i * 7919 % 10000) / 100,
    tags = { "t" .. i % 5, "t" .. i % 3 }, stock = { warehouse = i % 4, shelf = i * 3 % 50 }, active = i % 3 ~= 0,
  }
end
local js = to_json({ version = 3, items = catalog, note = "caf\u{e9} \u{263a}" })
local back = decode(js)
local rejs = to_json(back)
local psum = 0
for _, it in ipairs(back.items) do psum = psum + it.price + it.stock.shelf end
print("json", #js, rejs == js, #back.items, string.format("%.2f", psum), back.note, back.items[7].name)
print(js:sub(1, 90))

-- Tiny language: tokenizer, Pratt parser, tree-walking evaluator --------------
local function tokenize(src)
  local toks, i = {}, 1
  while i <= #src do
    local c = src:sub(i, i)
    if c:match("%s") then i = i + 1
    elseif c:match("%d") then local n = src:match("^%d+", i); toks[#toks + 1] = { "num", tonumber(n) }; i = i + #n
    elseif c:match("[%a_]") then local w = src:match("^[%w_]+", i); toks[#toks + 1] = { "id", w }; i = i + #w
    else
      local two = src:sub(i, i + 1)
      if two == "==" or two == "<=" or two == "!=" then toks[#toks + 1] = { "op", two }; i = i + 2
      else toks[#toks + 1] = { "op", c }; i = i + 1 end
    end
  end
  toks[#toks + 1] = { "eof" }
  return toks
end

local prec = { ["=="] = 1, ["!="] = 1, ["<"] = 1, ["<="] = 1, ["+"] = 2, ["-"] = 2, ["*"] = 3, ["/"] = 3, ["%"] = 3 }
local function parse(toks)
  local p = 1
  local function peek() return toks[p] end
  local function take(v) local t = toks[p]; if v and t[2] ~= v then error("expected " .. v) end p = p + 1 return t end
  local expr, block
  local function atom()
    local t = take()
    if t[1] == "num" then return { "num", t[2] } end
    if t[2] == "(" then local e = expr(0); take(")") return e end
    if t[2] == "-" then return { "neg", atom() } end
    if peek()[2] == "(" then
      take("("); local args = {}
      if peek()[2] ~= ")" then repeat args[#args + 1] = expr(0) until take()[2] == ")" else take(")") end
      return { "call", t[2], args }
    end
    return { "var", t[2] }
  end
  function expr(min)
    local lhs = atom()
    while true do
      local op = peek()[2]
      local pr = prec[op]
      if not pr or pr <= min then return lhs end
      take()
      lhs = { "bin", op, lhs, expr(pr) }
    end
  end
  local function stmt()
    local t = peek()
    if t[2] == "while" then take(); local c = expr(0); return { "while", c, block() }
    elseif t[2] == "if" then
      take(); local c = expr(0); local th = block(); local el
      if peek()[2] == "else" then take(); el = block() end
      return { "if", c, th, el }
    elseif t[2] == "fn" then
      take(); local name = take()[2]; take("("); local params = {}
      if peek()[2] ~= ")" then repeat params[#params + 1] = take()[2] until take()[2] == ")" else take(")") end
      return { "fn", name, params, block() }
    elseif t[2] == "return" then take(); return { "ret", expr(0) }
    elseif t[2] == "print" then take(); return { "print", expr(0) }
    elseif toks[p + 1][2] == "=" then local name = take()[2]; take("="); return { "set", name, expr(0) }
    end
    return { "expr", expr(0) }
  end
  function block()
    take("{"); local body = {}
    while peek()[2] ~= "}" do body[#body + 1] = stmt(); if peek()[2] == ";" then take() end end
    take("}")
    return body
  end
  local prog = {}
  while peek()[1] ~= "eof" do prog[#prog + 1] = stmt(); if peek()[2] == ";" then take() end end
  return prog
end

local function run(prog, out)
  local funcs = {}
  local RET = {}
  local exec
  local function eval(e, env)
    local k = e[1]
    if k == "num" then return e[2]
    elseif k == "var" then return env[e[2]]
    elseif k == "neg" then return -eval(e[2], env)
    elseif k == "bin" then
      local a, b, op = eval(e[3], env), eval(e[4], env), e[2]
      if op == "+" then return a + b elseif op == "-" then return a - b elseif op == "*" then return a * b
      elseif op == "/" then return a // b elseif op == "%" then return a % b elseif op == "<" then return a < b and 1 or 0
      elseif op == "<=" then return a <= b and 1 or 0 elseif op == "==" then return a == b and 1 or 0 else return a ~= b and 1 or 0 end
    else
      local f = funcs[e[2]]
      local fenv = {}
      for i, name in ipairs(f[3]) do fenv[name] = eval(e[3][i], env) end
      local r = exec(f[4], fenv)
      return r and r[2] or 0
    end
  end
  function exec(body, env)
    for _, s in ipairs(body) do
      local k = s[1]
      if k == "set" then env[s[2]] = eval(s[3], env)
      elseif k == "print" then out[#out + 1] = eval(s[2], env)
      elseif k == "fn" then funcs[s[2]] = s
      elseif k == "ret" then return { RET, eval(s[2], env) }
      elseif k == "expr" then eval(s[2], env)
      elseif k == "while" then
        while eval(s[2], env) ~= 0 do local r = exec(s[3], env); if r then return r end end
      elseif k == "if" then
        local r
        if eval(s[2], env) ~= 0 then r = exec(s[3], env) elseif s[4] then r = exec(s[4], env) end
        if r then return r end
      end
    end
  end
  exec(prog, {})
end

local program = [[
fn fib(n) { if n < 2 { return n } return fib(n - 1) + fib(n - 2) }
fn gcd(a, b) { while b != 0 { t = b; b = a % b; a = t } return a }
fn isprime(n) { if n < 2 { return 0 } d = 2; while d * d <= n { if n % d == 0 { return 0 } d = d + 1 } return 1 }
print fib(12);
i = 1; s = 0; c = 0;
while i <= 120 { s = s + gcd(i * 7, 360); c = c + isprime(i); i = i + 1 }
print s; print c;
x = 0 - 17; print (x * 3 + 100) / 7 % 5;
]]
local out = {}
local ast = parse(tokenize(program))
run(ast, out)
print("interp", #ast, table.concat(out, " "))

-- load(): compile many generated chunks -------------------------------------
local total, compiled = 0, 0
for i = 1, 80 do
  local src = string.format([[
    local n, acc = ..., 0
    local t = { %d, %d, %d, k = "v%d" }
    for j = 1, n do
      if j %% %d == 0 then acc = acc + t[1] * j elseif j %% 3 == 1 then acc = acc - t[2] else acc = acc + #t.k end
    end
    local function helper%d(a, b) return (a << 2) ~ b, a // (b + 1) end
    local p, q = helper%d(acc, n)
    return p + q + select("#", t[1], t[2], t[3])
  ]], i, i * 2, i * 3, i, i % 5 + 2, i, i)
  local fn = assert(load(src, "=gen" .. i))
  compiled = compiled + 1
  total = total + fn(30 + i)
end
local ok, err = load("return 1 +* 2", "=bad")
local env_fn = load("x = (x or 0) + 1; return x", "=envchunk", "t", { })
print("load", compiled, total, ok, err, env_fn(), #string.dump(load("return 42")) > 0)
