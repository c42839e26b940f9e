/** The page's style sheet: a table layout on wide screens, one card per row on phones. */
export const CSS = `
:root{color-scheme:light;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#24292f}
body{margin:0 auto;max-width:1200px;padding:0 16px 32px;overflow-wrap:break-word}
header{display:flex;flex-wrap:wrap;align-items:baseline;justify-content:space-between;border-bottom:1px solid #d0d7de;margin-bottom:8px}
h1{font-size:20px;margin:12px 0}h2{font-size:18px;margin:24px 0 4px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;width:100%;margin:4px 0 8px}th,td{text-align:left;vertical-align:top;padding:5px 8px;border-bottom:1px solid #eaeef2}
thead th{background:#f6f8fa;font-weight:600}td.num{text-align:right}
.muted{color:#57606a}.err{color:#a40e26}.error{background:#ffebe9;padding:6px 10px;border-radius:6px;margin:6px 0}
.error p{margin:0}.error pre{margin:6px 0 0;white-space:pre-wrap;font-size:12px}
.notice{background:#ddf4ff;padding:6px 10px;border-radius:6px}
#summary{font-weight:600;padding:6px 10px;border-radius:6px}#summary.bad{background:#ffebe9}#summary.good{background:#dafbe1}
.badge{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;font-weight:600;border:1px solid transparent}
.s-ok,.o-ok{background:#dafbe1;color:#116329}.s-failing,.o-failed{background:#ffebe9;color:#a40e26}.s-stale,.s-overdue{background:#a40e26;color:#fff}
.o-lock-lost{background:#fff1e5;color:#953800}.o-running{background:#ddf4ff;color:#0550ae}.o-skipped{background:#eaeef2;color:#424a53}
.held{background:#fff8c5}.badge.held{color:#7d4e00}.badge.free{background:#eaeef2;color:#424a53}.badge.paused{background:#ddf4ff;color:#0a3069}
.durations{display:block;width:100%;height:120px;border:1px solid #d0d7de;border-radius:6px;background:#fff}.bar.o-ok{fill:#2da44e}.bar.o-failed{fill:#cf222e}.bar.o-skipped{fill:#8c959f}.bar.o-running{fill:#0969da}.bar.o-abandoned{fill:#bc4c00}
tr.held{background:none}tr.expired th,tr.expired td{color:#57606a}
figure{margin:8px 0 14px}figcaption{font-weight:600;margin-bottom:2px}
svg.timeline{display:block;border:1px solid #d0d7de;border-radius:6px;background:#fff;max-width:100%}
.legend{list-style:none;padding:0;margin:0 0 6px;display:flex;gap:14px;flex-wrap:wrap;font-size:12px}
.legend li::before{content:"";display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px;vertical-align:-1px}
.k-ok::before{background:#1a7f37}.k-abandoned::before{background:#953800}.k-failed::before{background:#cf222e}.k-lock-lost::before{background:#bc4c00}.k-running::before{background:#0969da}
.k-caught-up::before{background:#fff;border:2px solid #8250df}.k-skipped::before{background:#fff;border:2px solid #6e7781;transform:rotate(45deg)}.legend .k-missed::before{content:"✕";width:auto;height:auto;color:#6e7781}
form.release{margin:0}button{font:inherit;padding:2px 10px;border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;cursor:pointer}
button.danger{background:#cf222e;color:#fff;border-color:#a40e26}
a:focus,button:focus,input:focus,summary:focus,main:focus{outline:2px solid #0969da;outline-offset:2px}
.skip{position:absolute;left:-999px}.skip:focus{left:8px;top:8px;background:#fff;padding:4px}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
footer{margin-top:24px;color:#57606a;font-size:12px}
input[type=search]{max-width:100%}
@media (max-width:720px){
body{padding:0 10px 24px;overflow-wrap:anywhere}
table.tasks,table.locks,table.runs,table.tasks>tbody,table.locks>tbody,table.runs>tbody,table.tasks tr,table.locks tr,table.runs tr,table.tasks td,table.tasks th,table.locks td,table.locks th,table.runs td,table.runs th{display:block}
table.tasks>thead,table.locks>thead,table.runs>thead{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
table.tasks>tbody>tr,table.locks>tbody>tr,table.runs>tbody>tr{border:1px solid #d0d7de;border-radius:6px;margin:8px 0;padding:6px 10px}
table.tasks th,table.tasks td,table.locks th,table.locks td,table.runs th,table.runs td{border:0;padding:2px 0}
td[data-label]::before{content:attr(data-label) ": ";color:#57606a;font-weight:600}
td.num{text-align:left}
svg.timeline .minor{display:none}
}
`

/**
 * The page's script: adds the reader's local time to every <time>'s tooltip, filters the lock
 * tables as one types, and replaces <main> every few seconds (kept while the reader is typing or a
 * form is focused).
 */
export const SCRIPT = `(function(){
var main=document.getElementById('main');
function local(){document.querySelectorAll('time[datetime]').forEach(function(t){var d=new Date(t.getAttribute('datetime'));t.title='Your local time: '+d.toLocaleString()})}
function filter(){document.querySelectorAll('input[data-filter]').forEach(function(i){var q=i.value.toLowerCase();var t=document.getElementById(i.getAttribute('data-filter'));if(!t||!t.tBodies)return;Array.prototype.forEach.call(t.tBodies[0].rows,function(r){r.hidden=q!==''&&r.textContent.toLowerCase().indexOf(q)<0})})}
document.addEventListener('input',function(e){if(e.target.matches&&e.target.matches('input[data-filter]'))filter()});
local();
var every=Number(main.getAttribute('data-refresh'))||0;
if(every>0)setInterval(function(){
var a=document.activeElement;if(a&&a!==document.body&&main.contains(a)&&a.tagName!=='A')return;
var u=new URL(location.href);u.searchParams.set('fragment','main');
fetch(u,{headers:{accept:'text/html'},credentials:'same-origin'}).then(function(r){return r.ok?r.text():null}).then(function(h){if(h===null)return;var focused=a&&a.id;main.innerHTML=h;local();filter();if(focused){var f=document.getElementById(focused);if(f)f.focus()}}).catch(function(){})
},every*1000);
})();`
