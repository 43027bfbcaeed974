-- Closures and upvalues (counters, memoize, compose, iterators) and metatable-based OOP:
-- class inheritance via __index, operator metamethods (__add/__mul/__eq/__lt/__le/__len/__concat/__call/__tostring), varargs.
math.randomseed(42)

-- closures
local function counter(step)
  local n = 0
  return function() n = n + step; return n end
end
local function compose(...)
  local fs = { ... }
  return function(x)
    for i = #fs, 1, -1 do x = fs[i](x) end
    return x
  end
end
local function memoize(f)
  local cache = {}
  return function(n)
    local v = cache[n]
    if v == nil then v = f(n); cache[n] = v end
    return v
  end
end
local function range(a, b, step)
  return function(_, i)
    i = i + step
    if i <= b then return i end
  end, nil, a - step
end

local c1, c2 = counter(1), counter(3)
local acc = 0
for _ = 1, 6000 do acc = acc + c1() + c2() end
local f = compose(function(x) return x + 1 end, function(x) return x * 2 end, function(x) return x - 3 end)
for i in range(1, 6000, 3) do acc = acc + f(i) end
local slowsq = memoize(function(n) local s = 0 for k = 1, n do s = s + k end return s end)
for i = 1, 2000 do acc = acc + slowsq(i % 150) end
print("closures", acc, c1(), c2())

local function sum(...)
  local s = 0
  for i = 1, select("#", ...) do s = s + (select(i, ...)) end
  return s
end
local function pack_unpack(...)
  local t = table.pack(...)
  return sum(table.unpack(t, 1, t.n))
end
local vs = 0
for i = 1, 1000 do vs = vs + pack_unpack(i, i + 1, i + 2, i % 7, 5) end
print("varargs", vs)

-- a vector type with operators
local Vec = {}
Vec.__index = Vec
local function vec(x, y) return setmetatable({ x = x, y = y }, Vec) end
Vec.__add = function(a, b) return vec(a.x + b.x, a.y + b.y) end
Vec.__sub = function(a, b) return vec(a.x - b.x, a.y - b.y) end
Vec.__mul = function(a, k) return vec(a.x * k, a.y * k) end
Vec.__eq = function(a, b) return a.x == b.x and a.y == b.y end
Vec.__lt = function(a, b) return a:len2() < b:len2() end
Vec.__le = function(a, b) return a:len2() <= b:len2() end
Vec.__len = function(a) return math.sqrt(a:len2()) end
Vec.__tostring = function(a) return string.format("(%.2f,%.2f)", a.x, a.y) end
Vec.__concat = function(a, b) return tostring(a) .. tostring(b) end
function Vec:len2() return self.x * self.x + self.y * self.y end

local pos, vel = vec(0, 0), vec(1.5, -0.5)
local g = vec(0, -0.01)
local bounces = 0
for _ = 1, 1500 do
  pos = pos + vel * 0.1
  vel = vel + g
  if pos.y < 0 then pos = vec(pos.x, -pos.y); vel = vec(vel.x * 0.99, -vel.y * 0.8); bounces = bounces + 1 end
end
local cmp = 0
for i = 1, 600 do
  local a, b = vec(i % 13, i % 7), vec(i % 11, i % 5)
  if a < b then cmp = cmp + 1 end
  if a <= b then cmp = cmp + 1 end
  if a == b then cmp = cmp + 10 end
end
print("vec", tostring(pos), bounces, cmp, string.format("%.3f", #vec(3, 4)), vec(1, 2) .. vec(3, 4))

-- class hierarchy: Shape -> Rect -> Square, Shape -> Circle
local function class(parent)
  local c = {}
  c.__index = c
  if parent then setmetatable(c, { __index = parent }) end
  c.new = function(...)
    local o = setmetatable({}, c)
    o:init(...)
    return o
  end
  return c
end
local Shape = class()
function Shape:init(name) self.name = name; Shape.count = (Shape.count or 0) + 1 end
function Shape:describe() return string.format("%s area=%.2f perim=%.2f", self.name, self:area(), self:perimeter()) end
local Rect = class(Shape)
function Rect:init(w, h) Shape.init(self, "rect"); self.w, self.h = w, h end
function Rect:area() return self.w * self.h end
function Rect:perimeter() return 2 * (self.w + self.h) end
local Square = class(Rect)
function Square:init(s) Rect.init(self, s, s); self.name = "square" end
local Circle = class(Shape)
function Circle:init(r) Shape.init(self, "circle"); self.r = r end
function Circle:area() return math.pi * self.r * self.r end
function Circle:perimeter() return 2 * math.pi * self.r end

local shapes = {}
for i = 1, 1000 do
  local k = math.random(3)
  if k == 1 then shapes[i] = Rect.new(math.random(1, 20), math.random(1, 20))
  elseif k == 2 then shapes[i] = Square.new(math.random(1, 15))
  else shapes[i] = Circle.new(math.random(1, 10)) end
end
local area, per = 0, {}
for _, s in ipairs(shapes) do
  area = area + s:area()
  per[s.name] = (per[s.name] or 0) + 1
end
print("shapes", Shape.count, string.format("%.2f", area), per.rect, per.square, per.circle, shapes[1]:describe(), shapes[1000]:describe())

-- callable objects, __newindex proxies and read-only tables
local Acc = setmetatable({ total = 0 }, { __call = function(self, v) self.total = self.total + v; return self end })
for i = 1, 2000 do Acc(i % 10) end
local log = {}
local store = {}
local proxy = setmetatable({}, {
  __index = function(_, k) return store[k] end,
  __newindex = function(_, k, v) log[#log + 1] = k; store[k] = v end,
})
for i = 1, 800 do proxy["k" .. (i % 50)] = (proxy["k" .. (i % 50)] or 0) + i end
local ro = setmetatable({}, { __index = { a = 1 }, __newindex = function() error("read-only", 2) end })
local ok, err = pcall(function() ro.b = 2 end)
print("meta", Acc.total, #log, proxy.k7, proxy.k49, ro.a, ok, err:match("read%-only"))

-- a bank simulation: accounts with closures as private state
local function account(balance)
  local history = 0
  local self = {}
  function self.deposit(v) balance = balance + v; history = history + 1 end
  function self.withdraw(v)
    if v > balance then return false end
    balance = balance - v; history = history + 1; return true
  end
  function self.state() return balance, history end
  return self
end
local accts = {}
for i = 1, 50 do accts[i] = account(i * 10) end
local refused = 0
for i = 1, 4000 do
  local a = accts[math.random(50)]
  if i % 3 == 0 then a.deposit(math.random(1, 40)) elseif not a.withdraw(math.random(1, 60)) then refused = refused + 1 end
end
local tb, th = 0, 0
for _, a in ipairs(accts) do local b, h = a.state(); tb = tb + b; th = th + h end
print("bank", tb, th, refused)
