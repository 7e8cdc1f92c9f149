import sys,subprocess,re
# D1 misses (read / write) per tensor by function group, from cg_annotate --show=Ir,D1mr,D1mw
T=30000  # 30 steps x 1,000 tensors per rank
num=r'([\d,]+)(?: \(\s*[\d.]+%\))?'
pat=re.compile(r'^\s*'+num+r'\s+'+num+r'\s+'+num+r'\s+(\S.*)$')
def parse(f):
  out=subprocess.run(['cg_annotate','--threshold=0','--auto=no','--show=Ir,D1mr,D1mw',f],capture_output=True,text=True).stdout
  rows=[]
  for l in out.splitlines():
    m=pat.match(l)
    if m and ':' in m.group(4): rows.append(([int(x.replace(',','')) for x in m.groups()[:3]],m.group(4)))
  return rows
def group(name):
  if 'PROGRAM TOTALS' in name: return None
  if re.search(r'sum_f32|copy_avx2|memmove|memcpy|memset|stl_algobase.h:main|probe\.cc|opal|ompi|mca_|pmix|libnbc|MPI',name): return 'data+MPI'
  if re.search(r'kolo::|malloc|free|pthread|operator new|operator delete|futex|syscall|Request|Handle',name): return 'kolo+alloc+locks'
  return 'other'
for f in sys.argv[1:]:
  rows=parse(f); tot={}
  for v,name in rows:
    k=group(name)
    if k is None: continue
    t=tot.setdefault(k,[0,0,0])
    for i in range(3): t[i]+=v[i]
  for k,t in sorted(tot.items()): print(f, '%-17s Ir %6.0f  D1mr %6.1f  D1mw %6.1f per tensor'%(k,t[0]/T,t[1]/T,t[2]/T))
  top=sorted([r for r in rows if group(r[1])=='kolo+alloc+locks'], key=lambda r:-(r[0][1]+r[0][2]))[:int(sys.argv[0] and 16)]
  for v,name in top: print('   %6.2f %6.2f  %s'%(v[1]/T,v[2]/T,name[:120]))
